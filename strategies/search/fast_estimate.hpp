#pragma once
// The search's fast tier: a step time for a plan without the event engine, built from the
// same pieces the step simulator lowers — the passes costed by the kernel-time model
// (pass_cost), every collective timed by the engine's frozen flow-level cost on the
// representative's real process groups, the schedule's pipeline fill and drain, the
// data-parallel buckets (overlapped with the last backward or not), ZeRO-1/2 parameter
// gathers, ZeRO-3 per-unit gathers and reduce-scatters, the optimizer step, and the SM
// contention of overlapped communication — composed in closed form (docs/search.md states
// each formula). Memory is the memory model itself (models/memory.hpp), exact.
//
// What does not change between candidates is computed once and kept: the op-level inputs
// of the memory model and the pass costs per (tp, cp, ep, mbs, sp, recompute, tied head),
// the in-flight micro-batches per (schedule, pp, micro-batches, vpp), the process groups per
// (tp, cp, ep, dp, pp) and every collective's time. One estimator per thread: it is not
// thread-safe (the estimators of other threads share their collective times, behind a
// mutex), and its answers do not depend on what it or the others answered before.
#include <memory>

#include "models/model_spec.hpp"
#include "models/training_plan.hpp"
#include "strategies/step_simulator.hpp"
#include "topologies/cluster.hpp"

namespace loom::strategies {

struct FastCaches;            // strategies/search/fast_model.hpp
class SharedCollectiveTimes;  // strategies/search/fast_model.hpp

/// The fast tier for one model on one cluster (see file comment).
class FastEstimator {
 public:
  /// `model` and `cluster` must outlive the estimator; `options` as the exact tier uses them
  /// (network mode, kernel model, collective overrides). `shared`: collective times shared
  /// with the estimators of other threads (same model, cluster and options; each keeps its
  /// own engine and caches); null: its own.
  FastEstimator(const models::ModelSpec& model, const topo::Cluster& cluster,
                const SimulateOptions& options = {},
                std::shared_ptr<SharedCollectiveTimes> shared = nullptr);
  ~FastEstimator();
  FastEstimator(const FastEstimator&) = delete;
  FastEstimator& operator=(const FastEstimator&) = delete;

  /// Peak bytes per GPU over the stages of a valid plan: the memory model's peak_bytes, as
  /// the data-parallel design leaves it (strategies::estimate_memory).
  double peak_memory_bytes(const models::TrainingPlan& plan);
  /// Estimated step time of a valid plan, in seconds.
  double step_time_s(const models::TrainingPlan& plan);

 private:
  std::unique_ptr<FastCaches> caches_;
};

}  // namespace loom::strategies
