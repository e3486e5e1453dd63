#pragma once
// Where a layer's time goes (loom simulate --ops): every op of each distinct op list of a plan
// (the embedding, each kind of layer, the head) as the pass costing times it, before the
// engine schedules anything: kernel seconds per pass, host launches, and the collective each
// op issues (whose time the engine decides).
#include <string>
#include <vector>

#include "models/model_spec.hpp"
#include "models/training_plan.hpp"
#include "strategies/step/pass_cost.hpp"
#include "strategies/step_simulator.hpp"
#include "topologies/cluster.hpp"

namespace loom::strategies {

/// One distinct op list of a plan and what it costs one micro-batch on one GPU.
struct OpListBreakdown {
  std::string gpu;   ///< the GPU type it runs on (GpuSpec::name)
  std::string what;  ///< "embedding", "layer 0 (moe)", "head"
  int count = 1;     ///< op lists of the model alike (layers of the same kind)
  /// Its ops in order; a causal fused attention op's fwd_flops are those its kernel computes
  /// (GpuEfficiency::attention_causal_fraction of the square), so that FLOPs over seconds is
  /// the rate it runs at.
  std::vector<OpTiming> ops;
  /// The list's passes as the engine runs them: kernel seconds raised to the host's launch
  /// time where the host is slower (pass_cost host_bound_passes), and its collectives.
  PassCost pass;
  /// The same passes' kernel seconds alone (the sums of `ops`).
  double fwd_kernel_s = 0;
  double bwd_kernel_s = 0;  ///< input and weight gradients
  /// Every op CUDA-graphed: the list launches one graph per pass (pass.*_launches then count
  /// the kernels inside it, as single-process DataParallel's host tasks do).
  bool whole_graph = false;
};

/// Whether `op` has nothing of its own to show: no kernel seconds, launches or collective (an op
/// fused into another, e.g. the softmax inside fused attention).
bool fused_away(const OpTiming& op);

/// The op lists of `plan` on each of the cluster's GPU types in turn, timed as simulate_step
/// times them under `options` (the first type with its kernel model or the datasheet one,
/// other types with their datasheet models; each type's host launch time): the embedding, one
/// entry per distinct layer (kind, recompute, attention window, precision) with the first
/// layer's index and how many are alike, and the head.
std::vector<OpListBreakdown> op_breakdown(const models::ModelSpec& model,
                                          const models::TrainingPlan& plan,
                                          const topo::Cluster& cluster,
                                          const SimulateOptions& options = {});

}  // namespace loom::strategies
