#pragma once
// Internal to strategies/search: the fast tier's caches and the pieces its two source files
// share. fast_estimate.cpp builds them (pass costs, memory inputs, process groups,
// collective times); fast_timing.cpp composes a plan's step time from them.
#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "models/memory.hpp"
#include "sim/engine.hpp"
#include "strategies/search/fast_estimate.hpp"
#include "strategies/step/pass_cost.hpp"

namespace loom::strategies {

/// One unit kind's passes for one micro-batch on the representative GPU: compute seconds,
/// and its model-parallel communication split into TP (which tp_comm_overlap can hide) and
/// the rest (CP, EP), as the engine's frozen times on the representative's groups.
struct UnitTimes {
  double fwd = 0, bwd_input = 0, bwd_weight = 0, recompute = 0;
  double fwd_tp = 0, fwd_ep = 0, fwd_other = 0;
  double bwd_tp = 0, bwd_ep = 0, bwd_other = 0;
  double rec_tp = 0, rec_ep = 0, rec_other = 0;
  /// Of the TP collectives, the seconds they leave exposed under tp_comm_overlap
  /// (tp_overlap_exposed_s), per pass, with those of a context-parallel ring beside its
  /// attention (cp_overlapped); that ring's own seconds, kept out of *_other.
  double fwd_tpx = 0, bwd_tpx = 0, rec_tpx = 0;
  double fwd_cpo = 0, bwd_cpo = 0, rec_cpo = 0;
  double params = 0;         ///< parameters on this GPU
  double expert_params = 0;  ///< of which routed experts (reduced over EDP)
  /// Adds `times` copies of `other`.
  void add(const UnitTimes& other, double times = 1.0);
};

/// The kinds of unit a virtual stage holds, in cost_stages' order.
enum class UnitKind { EMBEDDING, DENSE, MOE, HEAD };
inline constexpr int UNIT_KINDS = 4;

/// Which group of the representative a collective runs on.
enum class GroupKind { TP, CP, EP, DP, EDP, P2P };
inline constexpr int GROUP_KINDS = 6;

/// The representative's process groups under one layout (stage 0's, as every stage's are
/// the same shape), with the concurrent twins of its data-parallel groups.
struct LayoutGroups {
  int id = 0;  ///< index of the layout (the unit-times memo)
  /// Per GroupKind, the sizes that decide that group and its concurrent twins (the TP group
  /// only tp; a DP group tp, cp and dp): layouts that share them share collective times.
  std::array<std::array<int, 4>, GROUP_KINDS> decided_by{};
  /// Per GroupKind, the representative's group (its ranks; P2P: it and its next stage's).
  std::array<std::vector<int>, GROUP_KINDS> groups;
  std::vector<std::vector<int>> dp_concurrent, edp_concurrent;
};

/// (tp, cp, ep, mbs, sp, recompute, pp == 1, cast micro-batches, chunk pp, chunk vpp): what
/// the op lists and pass costs read of a plan that the search varies; everything else they
/// read is the same for every candidate of one search. Cast micro-batches: the micro-batch
/// count when the FP8 weight casts are spread over it (cost_ops: 1 / m of them per pass),
/// else 0. Chunk pp and vpp: the plan's when which layers recompute depends on the model
/// chunks (full recompute, block method: models::layer_recomputed), else 0. Then whether TP
/// communication overlaps its GEMMs (tp_comm_overlap with tp > 1) and the CP design: the unit
/// times hold the exposed part of each overlapped TP or CP collective (tp_overlap_exposed_s),
/// so candidates that differ only in them must not share an entry (they did: the estimate of a
/// candidate depended on which candidate was estimated first, and `search --merge` refused
/// its own shards).
using LayerKey =
    std::tuple<int, int, int, std::int64_t, bool, int, bool, std::int64_t, int, int, bool, int>;
/// (tp, cp, ep, dp, pp): what the process groups depend on.
using LayoutKey = std::tuple<int, int, int, int, int>;
/// (schedule, pp, micro-batches, vpp): what a pipeline schedule depends on.
using ScheduleKey = std::tuple<int, int, std::int64_t, int>;

/// What the fast tier reads of a pipeline schedule (strategies/schedule.hpp), per stage: the
/// in-flight micro-batches (the memory model's), and per chunk the passes (F, B or Bi, W)
/// after the pass that ends its weight gradients and before its first forward.
struct ScheduleFacts {
  std::vector<double> in_flight;
  std::vector<std::vector<std::array<int, 3>>> after_final;   ///< [stage][chunk]: F, B/Bi, W
  std::vector<std::vector<std::array<int, 3>>> before_first;  ///< [stage][chunk]: F, B/Bi, W
};

/// One distinct layer of a unit kind and its share of the kind's layers.
struct LayerVariant {
  PassCost cost;
  double share = 1;
};

/// The pass costs of each unit kind under one LayerKey (cost_ops of the first layer of each
/// distinct variant, as cost_stages does). A kind's layers differ by whether the plan's
/// recompute covers them (models::layer_recomputed: torchtitan's every-k-th layer) and by
/// their attention window (sliding-window layers); recomputed variants come first. The
/// embedding and head have one variant of share 1; an absent kind none.
struct LayerCosts {
  std::array<std::vector<LayerVariant>, UNIT_KINDS> variants;
  /// The layer units' variants again by block (models::LayerKind) and by whether the
  /// first/last-layer rule keeps them in bf16 (models::layer_in_bf16), each blended over its
  /// own layers: a hybrid pattern's Mamba, attention and MLP layers apart, kept layers apart.
  std::array<std::array<std::vector<LayerVariant>, 2>, models::LAYER_KINDS> blocks;
};

/// Unit times of every kind, and of the layer units by block and bf16 (LayerCosts::blocks): a
/// chunk sums its layers by them (a transformer's blocks are its unit kinds, DENSE and MOE,
/// with the same times when no layer is kept).
struct UnitTimeSet {
  std::array<UnitTimes, UNIT_KINDS> units;
  std::array<std::array<UnitTimes, 2>, models::LAYER_KINDS> blocks;
};

/// (kind, LayoutGroups::decided_by, op, bytes): one collective of the representative.
using CollectiveKey = std::tuple<int, std::array<int, 4>, int, double>;

/// Hash of a CollectiveKey (the bytes by their bit pattern: keys compare exactly).
struct CollectiveKeyHash {
  std::size_t operator()(const CollectiveKey& k) const noexcept;
};
/// (kind, LayoutGroups::decided_by, op): one (group, op)'s data-parallel anchor line.
using CollectiveLineKey = std::tuple<int, std::array<int, 4>, int>;
/// Hash of a CollectiveLineKey.
struct CollectiveLineKeyHash {
  std::size_t operator()(const CollectiveLineKey& k) const noexcept;
};

/// Collective times shared by the estimators of one search's threads: a time depends only on
/// its key, not on which thread's engine lowered it.
class SharedCollectiveTimes {
 public:
  /// The time of `key` in seconds, if some thread has it.
  std::optional<double> find(const CollectiveKey& key) const;
  /// Records the time of `key` (a second record of the same key keeps the first).
  void insert(const CollectiveKey& key, double seconds);
  /// The memory model's op lists (models::memory_ops) of `plan`, whose layer key is `key`,
  /// built once for every thread: they are the fast tier's largest cache (each thread held
  /// its own copy: a DeepSeek-V3 / 2,048 H100 search peaked at 1.65 GB on 2 threads). Entries
  /// are never erased, so the reference stays valid for this object's lifetime.
  const models::MemoryOps& memory_ops(const LayerKey& key, const models::ModelSpec& model,
                                      const models::TrainingPlan& plan);
  /// Op lists built so far (one per distinct layer key, whichever thread asked first).
  std::size_t memory_ops_built() const;

 private:
  mutable std::mutex mutex_;
  std::map<CollectiveKey, double> times_;
  mutable std::mutex ops_mutex_;
  std::map<LayerKey, std::unique_ptr<const models::MemoryOps>> ops_;
};

/// Everything the fast tier keeps between candidates (see fast_estimate.hpp).
struct FastCaches {
  FastCaches(const models::ModelSpec& model, const topo::Cluster& cluster,
             const SimulateOptions& options, std::shared_ptr<SharedCollectiveTimes> shared);

  const models::ModelSpec& model;
  const topo::Cluster& cluster;
  SimulateOptions options;
  std::shared_ptr<const topo::KernelTimeModel> kernels;
  sim::Engine engine;                             ///< only its frozen collective times are used
  double slowdown = 1.0;                          ///< overlap_slowdown of the GPU
  std::shared_ptr<SharedCollectiveTimes> shared;  ///< collective times, across threads
  /// Per block (models::LayerKind), the model's layers of that block among its first l
  /// layers, l = 0..layers: a chunk's count of each block (and so of MoE layers) is a
  /// difference (the first_k_dense layout and hybrid patterns alike). Filled for the blocks
  /// the model has (`blocks_present`).
  std::array<std::vector<int>, models::LAYER_KINDS> block_layers_before;
  std::vector<int> blocks_present;  ///< LayerKind values, ascending

  const models::MemoryOps& memory_ops(const models::TrainingPlan& plan);
  const ScheduleFacts& schedule(const models::TrainingPlan& plan);
  const LayoutGroups& layout(const models::TrainingPlan& plan);
  /// Unit times of every kind under the plan's layer key and layout.
  const UnitTimeSet& unit_times(const models::TrainingPlan& plan);
  /// Seconds of one collective on the representative's group of `kind` (0 for a group of
  /// one rank), memoised.
  double collective_s(const LayoutGroups& groups, GroupKind kind, sim::CollectiveOp op,
                      double bytes);
  /// Seconds of a memory-bound copy moving `bytes` (reads + writes).
  double copy_s(const models::TrainingPlan& plan, double bytes) const;
  /// Seconds of one offloaded layer's copy to the host (or back) for one micro-batch: the
  /// offloaded layers' mean stored activations over the path from GPU 0 to its nearest CPU
  /// (cpu_offload.cpp).
  double offload_copy_s(const models::TrainingPlan& plan);
  /// Seconds of the optimizer step over `params` local parameters; under DeepSpeed's
  /// ZeRO-Offload the CPU step and the partition's copies to and from the host, taken whole
  /// after the backward (zero_offload.cpp overlaps the gradient copies with it).
  double optimizer_s(const models::TrainingPlan& plan, double params);
  /// Bytes per second of the path from GPU 0 to its nearest CPU (its bottleneck link at its
  /// payload rate), routed once.
  double host_link_Bps();

 private:
  std::map<LayerKey, const models::MemoryOps*> memory_ops_;  // into shared->memory_ops
  /// By LayerKey and the nodes an EP group spans (a flex dispatcher's exchange; 1 otherwise).
  std::map<std::pair<LayerKey, int>, LayerCosts> costs_;
  std::map<ScheduleKey, ScheduleFacts> schedules_;
  std::map<LayoutKey, LayoutGroups> layouts_;
  std::map<std::pair<LayerKey, int>, UnitTimeSet> unit_times_;
  // This thread's copy of what it asked, hashed: looked up for every chunk of every stage
  // (a std::map on this tuple was 41% of a GPT-3 / 1,024 A100 search). Lookup only, never
  // iterated.
  std::unordered_map<CollectiveKey, double, CollectiveKeyHash> collectives_;
  // Per (group, op): the data-parallel line through the two anchor sizes, as (intercept
  // seconds, slope seconds per byte), so a data-parallel call is one lookup. Lookup only.
  std::unordered_map<CollectiveLineKey, std::pair<double, double>, CollectiveLineKeyHash> dp_lines_;
  double offload_Bps_ = 0;  // offload_copy_s's path bandwidth (0: not yet routed)
};

/// The plan's layer key.
LayerKey layer_key(const models::TrainingPlan& plan);

/// The estimated step time of a valid plan (fast_timing.cpp; docs/search.md).
double fast_step_time(FastCaches& caches, const models::TrainingPlan& plan);

}  // namespace loom::strategies
