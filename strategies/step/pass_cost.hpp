#pragma once
// Pass costing, the second stage of a simulated step: the seconds of each pass (forward,
// backward input and weight gradients, recompute) of every model chunk and of every unit
// inside it, and the model-parallel collectives each pass issues. The op list comes from
// models/flops.hpp; every kernel is timed by the GPU kernel-time model (topologies/), which
// this stage only asks.
#include <compare>
#include <cstdint>
#include <string>
#include <vector>

#include "models/flops.hpp"
#include "models/model_spec.hpp"
#include "models/parallel_dim.hpp"
#include "models/plan_dtypes.hpp"  // compute_dtype: the dtype matmuls run in
#include "models/training_plan.hpp"
#include "sim/collectives.hpp"
#include "strategies/step/host_launch.hpp"
#include "strategies/step/tp_overlap.hpp"
#include "topologies/kernel_model.hpp"

namespace loom::topo {
class Cluster;
}

namespace loom::strategies {

/// One collective a pass performs on a model-parallel group (tp, cp or ep).
struct CommItem {
  models::Dim dim = models::Dim::TP;
  sim::CollectiveOp op = sim::CollectiveOp::ALL_REDUCE;
  double bytes = 0;  ///< nccl-tests "size" of the collective, in bytes
  /// How a TP collective overlaps its GEMM under tp_comm_overlap (NONE: exposed whole).
  TpOverlap tp_overlap;
};

/// Seconds of each pass of a run of layers (a unit or a model chunk), on one GPU, for one
/// micro-batch, and the collectives the passes issue.
struct PassCost {
  double fwd_s = 0;
  double bwd_input_s = 0;
  double bwd_weight_s = 0;
  double recompute_s = 0;
  std::vector<CommItem> fwd_comm;  ///< forward collectives (full recompute repeats them)
  std::vector<CommItem> bwd_comm;  ///< backward mirrors
  /// Forward collectives full recompute repeats (those of transformer layers only).
  std::vector<CommItem> recompute_comm;
  double params = 0;  ///< parameters on this GPU
  /// Parameters of each op that holds some, in op order (the tensors a parameter server
  /// deals round-robin, unit by unit); a unit's own list: add() leaves it out of sums.
  std::vector<double> tensors;
  /// Kernels the host launches for the forward, the backward and the recompute (a cached
  /// FP8 weight cast counts its share; collectives one each; topo::kernel_launches).
  double fwd_launches = 0;
  double bwd_launches = 0;        ///< see fwd_launches
  double recompute_launches = 0;  ///< see fwd_launches
  /// Host seconds the framework spends in the forward, the backward and the recompute beyond
  /// its kernels' launches, at the speed of the host that measured them (GRACE_HOST_OP_S per
  /// launch): what Transformer Engine's routed-expert MLP blocks take beyond their launches
  /// (expert_block_host_s), negative where their launches, issued inside one TE op, are more
  /// than the measured block (many local experts).
  double fwd_host_s = 0;
  double bwd_host_s = 0;        ///< see fwd_host_s
  double recompute_host_s = 0;  ///< see fwd_host_s
  /// Adds `other`'s seconds, collectives, parameters and kernels.
  void add(const PassCost& other);
};

/// One FSDP unit and bucketing granule of a virtual stage: the embedding, a layer or the head.
struct Unit {
  std::string name;  ///< "emb", "L12", "head"
  PassCost cost;
  int layer = -1;  ///< the model layer this unit runs; -1 for the embedding and the head
};

/// The costed work of every virtual stage of the plan.
struct StageWork {
  std::vector<std::vector<Unit>> units;  ///< by virtual stage: its units in forward order
  std::vector<PassCost> chunk_cost;      ///< by virtual stage: the sum of its units
};

/// Host seconds of one pass of a routed-expert MLP block (fc1, activation, fc2) in
/// Transformer Engine's grouped linears with `local_experts` experts, at the reference host
/// speed: a fixed part plus a part per local expert, less the weight quantisers' set-up when
/// the linears are not `quantised` (FP8 / NVFP4) (see pass_cost.cpp for the source).
struct ExpertBlockHost {
  double forward_s = 0;
  double backward_s = 0;
};
ExpertBlockHost expert_block_host_s(double local_experts, bool quantised = true);

/// The `ep_nodes` of cost_ops for an expert-parallel group: the nodes it spans when each
/// holds the same number of its ranks, else 1 (an uneven group's flex exchange is costed as
/// one all-to-all over the group, without the per-node step).
int exchange_nodes(const topo::Cluster& cluster, const std::vector<int>& ep_group);
/// The `ep_nodes` of cost_ops for `plan`: exchange_nodes of its EP group under the flex
/// dispatcher with ep > 1, else 1 (no other exchange depends on it).
int flex_exchange_nodes(const models::TrainingPlan& plan, const topo::Cluster& cluster,
                        const std::vector<int>& ep_group);
/// One op of an op list as cost_ops times it, for one micro-batch on one GPU (loom simulate
/// --ops): its kernels' seconds in each pass (the weight-gradient pass with its
/// gradient-accumulation add), the launches the host issues for them (0 when a CUDA graph
/// captures the op) and the collective that follows it in the forward.
struct OpTiming {
  std::string name;
  models::OpKind kind = models::OpKind::ELEMENTWISE;
  double fwd_s = 0;
  double bwd_input_s = 0;
  double bwd_weight_s = 0;
  double fwd_launches = 0;
  double bwd_launches = 0;
  bool graphed = false;
  models::CommKind comm = models::CommKind::NONE;
  double comm_bytes = 0;  ///< the collective's tensor on this GPU, bytes
  /// The forward's FLOPs as its kernel computes them (a causal fused attention skips the
  /// masked half the model counts) and the bytes it reads and writes (activations in and out,
  /// weights): the achieved rates' numerators. Filled by op_breakdown, not cost_ops.
  double fwd_flops = 0;
  double fwd_bytes = 0;
  /// The collectives cost_ops appended for this op to PassCost::fwd_comm, bwd_comm and
  /// recompute_comm (the trace lays each one out beside its op), and the share of the
  /// forward's seconds the recompute re-runs.
  int fwd_comm_items = 0;
  int bwd_comm_items = 0;
  int recompute_comm_items = 0;
  double recompute_share = 0;
};

/// Which part of the model an op list is. Megatron's full recompute
/// (--recompute-granularity full) checkpoints transformer layers only: the embedding and the
/// LM head run once.
enum class OpList { LAYER, EMBEDDING, HEAD };

/// Costs one op list (a layer, the embedding or the head) under the plan's precision,
/// recompute policy and attention kernels. Under fp8 only the layers' linears
/// (OpCost::fp8_linear) run in FP8, each paying its operands' casts (KernelKind::FP8_CAST);
/// attention, the head and the router stay bf16.
///
/// `host_launch_s` > 0: host seconds per eager kernel launch. The host issues kernels ahead
/// of the GPU, so a pass takes at least its launches' host time (host_bound_passes); a layer
/// whose every op is CUDA-graphed launches one graph per pass and is never host-bound; a
/// partially graphed one (a partial --cuda-graph-scope, or an MoE layer, whose dispatch,
/// routed experts and combine no graph captures) launches one graph plus its eager ops. 0: no
/// host bound.
/// Under Megatron's fusions (Transformer Engine) a routed-expert matmul's host time is its half
/// of expert_block_host_s plus its scale swizzles' launches, scaled by host_launch_s /
/// GRACE_HOST_OP_S (the GB200 host it was measured on; the block's GEMM launches are inside
/// that measurement).
/// `recomputed` false: a layer the plan's recompute skips (models::layer_recomputed, e.g.
/// torchtitan's every-k-th layer): nothing of it re-runs.
/// `ep_nodes`: the nodes one expert-parallel group spans, which a flex dispatcher's
/// exchange depends on (models::CommKind::EP_TOKEN_EXCHANGE; 1 keeps it inside nodes).
/// `timings`: when set, receives each op's OpTiming in op order.
PassCost cost_ops(const std::vector<models::OpCost>& ops, const models::TrainingPlan& plan,
                  const topo::KernelTimeModel& kernels, OpList list = OpList::LAYER,
                  double host_launch_s = 0, bool recomputed = true, int ep_nodes = 1,
                  std::vector<OpTiming>* timings = nullptr);

/// A pass's seconds raised to its host time, `launches` x `host_launch_s` plus the framework's
/// host seconds (fwd_host_s ..., scaled by host_launch_s / GRACE_HOST_OP_S): the
/// forward and the recompute to their own, the backward's input- and weight-gradient parts
/// scaled together to the backward's.
void host_bound_passes(PassCost& c, double host_launch_s);

/// Host seconds per launch that bound the passes of `plan` (cost_ops): `host_launch_s`,
/// except 0 under DataParallel, whose one process's launches are simulated as host tasks
/// (dp_single_process.cpp).
double pass_host_launch_s(const models::TrainingPlan& plan, double host_launch_s);
/// The same for a run's option (SimulateOptions::host_launch_s, -1: the GPU's host) on `gpu`:
/// pass_host_launch_s(plan, host_launch_for(option_s, gpu.host_op_s)).
double pass_host_launch_s(const models::TrainingPlan& plan, double option_s,
                          const topo::GpuSpec& gpu);

/// What sets a layer's op list, and so its pass costs, apart from another layer's: its kind,
/// whether the plan's recompute re-runs it (models::layer_recomputed), its attention window
/// (sliding-window layers) and whether it is kept in bf16 (models::layer_in_bf16). Layers with
/// equal keys cost the same; cost_stages, the search's fast tier and --ops group them by it.
struct LayerCostKey {
  models::LayerKind kind = models::LayerKind::DENSE;
  bool recomputed = true;
  std::int64_t window = 0;
  bool bf16 = false;
  auto operator<=>(const LayerCostKey&) const = default;
};
LayerCostKey layer_cost_key(const models::ModelSpec& model, const models::TrainingPlan& plan,
                            int layer);

/// Costs every virtual stage: the embedding on the first, each layer, the head on the last
/// (`host_launch_s` and `ep_nodes` as cost_ops).
StageWork cost_stages(const models::ModelSpec& model, const models::TrainingPlan& plan,
                      const topo::KernelTimeModel& kernels, double host_launch_s = 0,
                      int ep_nodes = 1);

}  // namespace loom::strategies
