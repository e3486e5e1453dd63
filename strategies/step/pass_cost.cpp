#include "strategies/step/pass_cost.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "models/flops.hpp"
#include "models/fused_ops.hpp"
#include "models/memory.hpp"
#include "models/moe_routing.hpp"
#include "topologies/cluster.hpp"

namespace loom::strategies {

using models::CommKind;
using models::OpKind;

void PassCost::add(const PassCost& o) {
  fwd_s += o.fwd_s;
  bwd_input_s += o.bwd_input_s;
  bwd_weight_s += o.bwd_weight_s;
  recompute_s += o.recompute_s;
  fwd_comm.insert(fwd_comm.end(), o.fwd_comm.begin(), o.fwd_comm.end());
  bwd_comm.insert(bwd_comm.end(), o.bwd_comm.begin(), o.bwd_comm.end());
  recompute_comm.insert(recompute_comm.end(), o.recompute_comm.begin(), o.recompute_comm.end());
  params += o.params;
  fwd_launches += o.fwd_launches;
  bwd_launches += o.bwd_launches;
  recompute_launches += o.recompute_launches;
  fwd_host_s += o.fwd_host_s;
  bwd_host_s += o.bwd_host_s;
  recompute_host_s += o.recompute_host_s;
}

namespace {

// A flex dispatcher's dispatch or combine (DeepEP, HybridEP), `bytes` the tokens' bytes once.
// Inside one node it sends each token once to each GPU its experts are on: an all-to-all of
// bytes x (GPUs reached) per rank. Across nodes it sends each token once per node over the
// rail to the GPU at its own position there, which forwards it over NVLink to the GPUs
// holding its experts (DeepSeek-V3 technical report, arXiv:2412.19437, Sec 3.2.2; DeepEP
// csrc/kernels/internode.cu: one RDMA copy per token and node, with a bitmask of its NVLink
// ranks): a rail all-to-all of bytes x (nodes reached), then a node all-to-all that carries,
// for each node peer, what arrived for it from every node, bytes x (GPUs reached) per rank
// in all. The two run one after the other (DeepEP pipelines them; the NVLink part is the
// smaller). The combine moves the same amounts back (reduced in the node before the rail).
std::vector<CommItem> token_exchange(const models::OpCost& op, int ep, int ep_nodes) {
  const auto& moe = op.routing;
  const double gpus = models::expected_blocks_reached(moe, ep);
  // Each node holds ep / ep_nodes of the group (exchange_nodes) and as many experts.
  const bool two_level = ep_nodes > 1 && ep % ep_nodes == 0 && moe.experts % ep_nodes == 0;
  if (!two_level)
    return {{models::Dim::EP, sim::CollectiveOp::ALL_TO_ALL, op.comm_bytes * gpus, {}}};
  const double nodes = models::expected_blocks_reached(moe, ep_nodes);
  return {{models::Dim::EP, sim::CollectiveOp::RAIL_ALL_TO_ALL, op.comm_bytes * nodes, {}},
          {models::Dim::EP, sim::CollectiveOp::NODE_ALL_TO_ALL, op.comm_bytes * gpus, {}}};
}

// Context parallelism's exchange of one layer (--cp-comm-type), forward and backward, for
// local keys and values of `kv` bytes and local queries of `q` bytes on each of cp ranks:
//   p2p / allgather: forward an all-gather of the K/V (cp - 1 ring steps of kv bytes, or
//     one gather), backward a reduce-scatter of their gradients: (cp - 1) kv bytes each way
//     per rank;
//   a2a (Ulysses): forward an all-to-all of Q, K, V (q + kv bytes per rank, (cp - 1) / cp
//     of it sent) and one of the attention output (q bytes), backward the same two.
std::pair<std::vector<CommItem>, std::vector<CommItem>> cp_exchange(const models::OpCost& op,
                                                                    models::CpCommType type,
                                                                    int cp) {
  using sim::CollectiveOp;
  const models::Dim dim = models::Dim::CP;
  const double kv = op.comm_bytes, q = op.cp_query_bytes;
  if (type == models::CpCommType::A2A) {
    std::vector<CommItem> x = {{dim, CollectiveOp::ALL_TO_ALL, q + kv, {}},
                               {dim, CollectiveOp::ALL_TO_ALL, q, {}}};
    return {x, x};
  }
  return {{{dim, CollectiveOp::ALL_GATHER, kv * cp, {}}},
          {{dim, CollectiveOp::REDUCE_SCATTER, kv * cp, {}}}};
}

// The forward collective after an op and its backward mirror (not EP_TOKEN_EXCHANGE).
std::pair<CommItem, CommItem> op_collectives(const models::OpCost& op) {
  using sim::CollectiveOp;
  const models::Dim dim = models::comm_dim(op.comm);
  switch (op.comm) {
    case CommKind::EP_TOKEN_EXCHANGE:
      throw InternalError("op_collectives: a token exchange is token_exchange's");
    case CommKind::TP_ALL_GATHER:
      // comm_bytes is the gathered (full) tensor: nccl-tests' size for all_gather.
      return {{dim, CollectiveOp::ALL_GATHER, op.comm_bytes, {}},
              {dim, CollectiveOp::REDUCE_SCATTER, op.comm_bytes, {}}};
    case CommKind::TP_REDUCE_SCATTER:
      return {{dim, CollectiveOp::REDUCE_SCATTER, op.comm_bytes, {}},
              {dim, CollectiveOp::ALL_GATHER, op.comm_bytes, {}}};
    case CommKind::EP_ALL_TO_ALL:
      return {{dim, CollectiveOp::ALL_TO_ALL, op.comm_bytes, {}},
              {dim, CollectiveOp::ALL_TO_ALL, op.comm_bytes, {}}};
    case CommKind::CP_KV_EXCHANGE:
      throw InternalError("op_collectives: a CP exchange is cp_exchange's");
    case CommKind::TP_ALL_REDUCE:
    case CommKind::NONE:
      break;
  }
  return {{dim, CollectiveOp::ALL_REDUCE, op.comm_bytes, {}},
          {dim, CollectiveOp::ALL_REDUCE, op.comm_bytes, {}}};
}

}  // namespace

namespace {

// One op of the model's op list as the kernel model sees it under `plan` (fused attention, its
// kernel, the FP8 recipe); `graphed` when its kernels replay from a CUDA graph.
topo::KernelOp kernel_op(const models::OpCost& op, const models::TrainingPlan& plan,
                         const topo::KernelTimeModel& kernels, bool graphed) {
  topo::KernelOp k;
  k.kind = op.kind == OpKind::MATMUL      ? topo::KernelKind::GEMM
           : op.kind == OpKind::ATTENTION ? topo::KernelKind::ATTENTION
                                          : topo::KernelKind::MEMORY_BOUND;
  k.m = op.shape.m;
  k.n = op.shape.n;
  k.k = op.shape.k;
  k.batch = op.shape.batch;
  k.per_group_kernels = op.expert && op.kind == OpKind::MATMUL;  // TE GroupedLinear
  k.forward_flops = op.fwd_flops;
  k.backward_input_flops = op.bwd_input_flops;
  k.backward_weight_flops = op.bwd_weight_flops;
  k.bytes = op.input_bytes + op.output_bytes + op.weight_bytes;
  k.causal = op.causal;
  k.seq_q = op.attention.seq_q;
  k.seq_kv = op.attention.seq_kv;
  k.head_dim = op.attention.head_dim;
  k.cp_ring = op.attention.cp;
  k.window = op.attention.window;
  k.fused = plan.flash_attention;
  // Soft-capped scores (Gemma 2) disqualify cuDNN's fused attention: Transformer Engine then
  // selects FlashAttention-2 (TE PR #3391, get_attention_backend with softcap != 0), as do HF
  // models through flash-attn >= 2.6 (modeling_gemma2.py `softcap`).
  if (plan.attention_kernel == models::AttentionKernel::FA2 || op.softcap)
    k.kernel = topo::AttentionKernel::FA2;
  k.fp8_recipe = plan.fp8_recipe.value_or(kernels.default_fp8_recipe());
  k.kernels = op.kernels;
  k.backward_bytes = op.backward_bytes;
  k.graphed = graphed;
  return k;
}

// Seconds of the gradient-accumulation add of `op`'s parameters for one micro-batch: a
// memory-bound kernel over every parameter unless the weight-gradient GEMM accumulates
// itself (Megatron's gradient-accumulation fusion).
bool grad_accumulation_kernel(const models::OpCost& op, const models::TrainingPlan& plan) {
  return op.params > 0 &&
         !(op.kind == OpKind::MATMUL && models::wgrad_accumulation_fused(plan.fusion));
}

double grad_accumulation_seconds(const models::OpCost& op, const models::TrainingPlan& plan,
                                 const topo::KernelTimeModel& kernels, bool graphed) {
  if (!grad_accumulation_kernel(op, plan)) return 0;
  topo::KernelOp add;
  add.kind = topo::KernelKind::MEMORY_BOUND;
  add.bytes = op.params * models::grad_accumulation_bytes_per_param(plan.grad_dtype);
  add.graphed = graphed;
  return kernels.seconds(add, topo::KernelPass::FORWARD, topo::DType::BF16);
}

// Seconds of each pass of `op` under the plan's precision. FP8 as Transformer Engine runs
// it (docs: "FP8 ... only in the Linear layers"; attention and the output layer are not TE
// FP8 modules): an fp8_linear GEMM runs in FP8 plus the casts of its operands; every other
// op runs in bf16. NVFP4 likewise, in FP4.
struct OpPasses {
  topo::PassSeconds t;
  double fwd_launches = 0;  ///< kernels the forward launches
  double bwd_launches = 0;  ///< kernels the backward (input and weight gradients) launches
  /// Of those, the block-scale swizzle kernels (KernelOp::swizzle_scales) of its casts;
  /// counted only for a routed-expert block's linears (op_seconds' `expert_block`).
  double fwd_swizzles = 0;
  double bwd_swizzles = 0;  ///< see fwd_swizzles
};

// Launches of each pass of `k`, added to `o`.
void add_launches(OpPasses& o, const topo::KernelOp& k, topo::DType math) {
  o.fwd_launches += topo::kernel_launches(k, topo::KernelPass::FORWARD, math);
  o.bwd_launches += topo::kernel_launches(k, topo::KernelPass::BACKWARD_INPUT, math) +
                    topo::kernel_launches(k, topo::KernelPass::BACKWARD_WEIGHT, math);
}

OpPasses op_seconds(const models::OpCost& op, const models::TrainingPlan& plan,
                    const topo::KernelTimeModel& kernels, bool graphed, bool expert_block) {
  const topo::DType dt = compute_dtype(plan.precision);
  topo::KernelOp k = kernel_op(op, plan, kernels, graphed);
  k.swizzle_scales = plan.scale_swizzle;
  OpPasses o;
  add_launches(o, k, dt);
  if (!models::low_precision_linears(plan.precision)) {
    o.t = kernels.pass_seconds(k, dt);
    return o;
  }
  if (!op.fp8_linear) {
    o.t = kernels.pass_seconds(k, topo::DType::BF16);
    return o;
  }
  topo::PassSeconds& t = o.t;
  t = kernels.pass_seconds(k, dt);
  topo::KernelOp cast = k;
  cast.kind = topo::KernelKind::FP8_CAST;
  // Megatron-core's forward_step calls set_is_first_microbatch() on a step's first
  // micro-batch (pipeline_parallel/schedules.py), and Transformer Engine's modules then cast
  // their weights once and reuse the cast for the step's other micro-batches
  // (is_first_microbatch: "allows caching of the FP8 versions of the weights"): the weight
  // casts are spread over the m micro-batches, 1 / m each.
  if (plan.fp8_weight_cache)
    cast.cached_operand_share =
        1.0 / static_cast<double>(std::max<std::int64_t>(plan.micro_batches(), 1));
  const topo::PassSeconds c = kernels.pass_seconds(cast, dt);
  t.forward += c.forward;
  t.backward_input += c.backward_input;
  t.backward_weight += c.backward_weight;
  add_launches(o, cast, dt);
  if (expert_block) {
    const topo::Fp8Recipe recipe = *cast.fp8_recipe;  // set above
    o.fwd_swizzles = topo::block_scale_swizzles(cast, topo::KernelPass::FORWARD, dt, recipe);
    o.bwd_swizzles =
        topo::block_scale_swizzles(cast, topo::KernelPass::BACKWARD_INPUT, dt, recipe) +
        topo::block_scale_swizzles(cast, topo::KernelPass::BACKWARD_WEIGHT, dt, recipe);
  }
  return o;
}

// `op`'s pass seconds (op_seconds) per chunk when its token dimension is split in `chunks`:
// its share of the whole op's seconds plus what its kernels lose at the chunk's smaller
// shape (matmul_efficiency of m / chunks rows; the casts keep their share).
OpPassSeconds chunk_seconds(const models::OpCost& op, const models::TrainingPlan& plan,
                            const topo::KernelTimeModel& kernels, bool graphed, int chunks) {
  const topo::PassSeconds whole = op_seconds(op, plan, kernels, graphed, false).t;
  const double n = std::max(chunks, 1);
  OpPassSeconds out{whole.forward / n, whole.backward_input / n, whole.backward_weight / n};
  if (chunks <= 1) return out;
  const bool low = models::low_precision_linears(plan.precision);
  const topo::DType dt = !low || op.fp8_linear ? compute_dtype(plan.precision) : topo::DType::BF16;
  topo::KernelOp k = kernel_op(op, plan, kernels, graphed);
  topo::KernelOp part = k;
  part.m = std::max<std::int64_t>(1, k.m / chunks);
  part.forward_flops /= n;
  part.backward_input_flops /= n;
  part.backward_weight_flops /= n;
  part.bytes = (op.input_bytes + op.output_bytes) / n + op.weight_bytes;
  const topo::PassSeconds a = kernels.pass_seconds(k, dt), b = kernels.pass_seconds(part, dt);
  out.forward += std::max(0.0, b.forward - a.forward / n);
  out.backward_input += std::max(0.0, b.backward_input - a.backward_input / n);
  out.backward_weight += std::max(0.0, b.backward_weight - a.backward_weight / n);
  return out;
}

// Whether `op` is one of the two grouped linears of a routed-expert MLP block as Megatron-core
// runs it: Transformer Engine's GroupedLinear (TEGroupedMLP), the stack of Megatron's fusions,
// one process per GPU (single-process DataParallel simulates its launches as host tasks).
bool te_expert_block(const models::OpCost& op, const models::TrainingPlan& plan) {
  return op.expert && op.kind == OpKind::MATMUL && plan.fusion == models::Fusion::MEGATRON &&
         plan.dp_mode != models::DpMode::DATAPARALLEL;
}

}  // namespace

// Host time of Transformer Engine's routed-expert MLP block, measured by a TE maintainer
// (T. Moon, NVIDIA/TransformerEngine issue #2897, "Reduce CPU overhead in grouped MLP block",
// April 2026): on GB200 with 64 experts and hidden size 128, so that the GPU work is
// negligible and the time is the host's, the block's forward takes ~1.2 ms and its backward
// ~2.1 ms. Of that, the issue itemises what grows with the expert count: the weight
// quantisers' set-up (90 us, forward), the wgrad tensor allocations (350 us) and
// clear_tensor_data on the saved tensors (200 us, backward), and the device-pointer gathering
// of every group's data and scales (>100 us, counted half per pass): 2.2 us forward and 9.4 us
// backward per expert at 64. The rest is taken as fixed per block. Unquantised (bf16) linears
// have no weight quantisers: their forward leaves out those 90 us / 64 per expert; the rest
// is kept, as no bf16 measurement was found. The measurement is of the fused MXFP8 block
// (TE PR #2769); the unfused GroupedLinear launches a cuBLAS GEMM and a quantisation per
// expert (TE issue #1499: torch.split and 2 x num_gemms torch.empty calls per quantisation),
// whose launches bound its host time where they take longer (cost_ops).
ExpertBlockHost expert_block_host_s(double local_experts, bool quantised) {
  constexpr double measured_experts = 64;
  constexpr double quantisers = 90e-6 / measured_experts;
  constexpr double per_expert_fwd = quantisers + 50e-6 / measured_experts;
  constexpr double per_expert_bwd = (350e-6 + 200e-6 + 50e-6) / measured_experts;
  constexpr double fixed_fwd = 1.2e-3 - measured_experts * per_expert_fwd;
  constexpr double fixed_bwd = 2.1e-3 - measured_experts * per_expert_bwd;
  const double e = std::max(local_experts, 1.0);
  return {fixed_fwd + e * (per_expert_fwd - (quantised ? 0.0 : quantisers)),
          fixed_bwd + e * per_expert_bwd};
}

double pass_host_launch_s(const models::TrainingPlan& plan, double host_launch_s) {
  return plan.dp_mode == models::DpMode::DATAPARALLEL ? 0 : host_launch_s;
}

double pass_host_launch_s(const models::TrainingPlan& plan, double option_s,
                          const topo::GpuSpec& gpu) {
  return pass_host_launch_s(plan, host_launch_for(option_s, gpu.host_op_s));
}

void host_bound_passes(PassCost& c, double host_launch_s) {
  if (host_launch_s <= 0) return;
  const double speed = host_launch_s / GRACE_HOST_OP_S;
  c.fwd_s = std::max(c.fwd_s, c.fwd_launches * host_launch_s + c.fwd_host_s * speed);
  c.recompute_s =
      std::max(c.recompute_s, c.recompute_launches * host_launch_s + c.recompute_host_s * speed);
  const double gpu = c.bwd_input_s + c.bwd_weight_s;
  const double host = c.bwd_launches * host_launch_s + c.bwd_host_s * speed;
  if (gpu > 0 && host > gpu) {
    c.bwd_input_s *= host / gpu;
    c.bwd_weight_s *= host / gpu;
  }
}

PassCost cost_ops(const std::vector<models::OpCost>& ops, const models::TrainingPlan& plan,
                  const topo::KernelTimeModel& kernels, OpList list, double host_launch_s,
                  bool recomputed, int ep_nodes, std::vector<OpTiming>* timings) {
  const bool full =
      plan.recompute == models::Recompute::FULL && list == OpList::LAYER && recomputed;
  PassCost c;
  // Megatron's CUDA graphs capture the transformer layers (TE make_graphed_callables): whole
  // layers, or under a partial scope only the ops of its modules (models::GraphModule); the
  // embedding and the head launch eagerly.
  const bool layer = list == OpList::LAYER;
  const bool full_scope = layer && plan.graphs(models::GraphModule::FULL);
  // Every op captured: a dense layer under the full scope. An MoE layer's dispatch, routed
  // experts and combine have dynamic shapes no graph captures ("not feasible for MoE models
  // due to the dynamic shape issue", Megatron-LM deepseek-v3-gb200-optimization 2.3), so
  // under the full scope it is graphed in part.
  const bool whole =
      full_scope && std::none_of(ops.begin(), ops.end(),
                                 [](const models::OpCost& op) { return op.dynamic_shape; });
  // Megatron captures a layer's scopes in one graph (transformer_layer.py,
  // _te_cuda_graph_capture): a partially graphed layer launches it once per pass plus its
  // eager ops. A whole-layer graph is never host-bound; its launches are counted as eager
  // ones for single-process DataParallel's host tasks, as before partial graphs.
  bool graph_fwd = false, graph_recompute = false;
  // torchtitan checkpoints its transformer blocks only; Megatron's recompute modules tag
  // ops of any list (the transformer layer of DeepSeek-V3's MTP head too).
  const bool op_policy = plan.selective_recompute == models::SelectiveRecompute::OP;
  const std::vector<double> rerun_share = recomputed && (layer || !op_policy)
                                              ? models::selective_rerun_fractions(plan, ops)
                                              : std::vector<double>(ops.size(), 0.0);
  const auto is_graphed = [&](const models::OpCost& op) {
    return layer && !op.dynamic_shape &&
           (full_scope || (op.graph_module && plan.graphs(*op.graph_module)));
  };
  const std::vector<TpOverlapPair> overlaps =
      tp_overlaps(ops, plan, [&](const models::OpCost& op, int chunks) {
        return chunk_seconds(op, plan, kernels, is_graphed(op), chunks);
      });
  for (size_t i = 0; i < ops.size(); ++i) {
    const models::OpCost& op = ops[i];
    const bool graphed = is_graphed(op);
    const bool expert_block = !graphed && te_expert_block(op, plan);
    const OpPasses o = op_seconds(op, plan, kernels, graphed, expert_block);
    const topo::PassSeconds& t = o.t;
    const double bwd_weight_s =
        t.backward_weight + grad_accumulation_seconds(op, plan, kernels, graphed);
    c.fwd_s += t.forward;
    c.bwd_input_s += t.backward_input;
    c.bwd_weight_s += bwd_weight_s;
    const double share = full ? 1.0 : rerun_share[i];
    const bool rerun = share > 0;
    c.recompute_s += share * t.forward;
    c.params += op.params;
    if (op.params > 0) c.tensors.push_back(op.params);
    const bool comm = op.comm != CommKind::NONE && op.comm_bytes > 0;
    if (graphed && !whole) {
      if (!graph_fwd) {
        c.fwd_launches += 1;
        c.bwd_launches += 1;
        graph_fwd = true;
      }
      if (rerun && !graph_recompute) {
        c.recompute_launches += 1;
        graph_recompute = true;
      }
    }
    double fwd_launches = 0, bwd_launches = 0;  // eager ones
    if (!graphed || whole) {
      fwd_launches = o.fwd_launches + (comm ? 1 : 0);
      bwd_launches = o.bwd_launches + (comm ? 1 : 0) + (grad_accumulation_kernel(op, plan) ? 1 : 0);
      c.fwd_launches += fwd_launches;
      c.bwd_launches += bwd_launches;
      if (rerun) c.recompute_launches += fwd_launches;
    }
    if (timings)
      timings->push_back({op.name, op.kind, t.forward, t.backward_input, bwd_weight_s,
                          graphed ? 0.0 : fwd_launches, graphed ? 0.0 : bwd_launches, graphed,
                          comm ? op.comm : CommKind::NONE, comm ? op.comm_bytes : 0.0});
    if (timings) timings->back().recompute_share = share;
    if (expert_block) {
      // The grouped linear's host time is its half of the measured block's, which covers its
      // GEMMs' and casts' launches (issued inside Transformer Engine's C++ op, not as Python
      // ops) but not the per-group scale swizzles of containers before GEMM-ready scales,
      // kernels it did not launch. Its launches are counted above at the host's time per op,
      // so the block adds what it takes beyond them at the measuring GB200's speed
      // (GRACE_HOST_OP_S per launch), negative where its launches are many: in all, half the
      // block plus the swizzles' launches, scaled to the host (host_bound_passes). The
      // block's activation keeps its own launch. Quantised as the op is (a layer kept in
      // bf16 sets up no weight quantisers).
      const ExpertBlockHost h =
          expert_block_host_s(static_cast<double>(op.shape.batch),
                              models::low_precision_linears(plan.precision) && op.fp8_linear);
      const double fwd_extra =
          h.forward_s / 2 - (o.fwd_launches - o.fwd_swizzles) * GRACE_HOST_OP_S;
      const double bwd_extra =
          h.backward_s / 2 - (o.bwd_launches - o.bwd_swizzles) * GRACE_HOST_OP_S;
      c.fwd_host_s += fwd_extra;
      c.bwd_host_s += bwd_extra;
      c.recompute_host_s += share * fwd_extra;
    }
    if (comm) {
      std::vector<CommItem> fwd, bwd;
      if (op.comm == CommKind::EP_TOKEN_EXCHANGE) {
        fwd = bwd = token_exchange(op, plan.ep, ep_nodes);
      } else if (op.comm == CommKind::CP_KV_EXCHANGE) {
        std::tie(fwd, bwd) = cp_exchange(op, plan.cp_comm_type, plan.cp);
        fwd.front().tp_overlap = overlaps[i].fwd;
        bwd.front().tp_overlap = overlaps[i].bwd;
      } else {
        const auto items = op_collectives(op);
        fwd = {items.first};
        bwd = {items.second};
        fwd.front().tp_overlap = overlaps[i].fwd;
        bwd.front().tp_overlap = overlaps[i].bwd;
      }
      c.fwd_comm.insert(c.fwd_comm.end(), fwd.begin(), fwd.end());
      c.bwd_comm.insert(c.bwd_comm.end(), bwd.begin(), bwd.end());
      // e.g. the MoE all-to-alls under "moe". torchtitan's op policy saves the outputs of
      // reduce-scatters and all-to-alls (_save_list) and re-runs only the sequence-parallel
      // all-gathers before its column-parallel linears.
      const bool rerun_comm = rerun && (full || !op_policy || op.comm == CommKind::TP_ALL_GATHER);
      if (rerun_comm) c.recompute_comm.insert(c.recompute_comm.end(), fwd.begin(), fwd.end());
      if (timings) {
        OpTiming& t = timings->back();
        t.fwd_comm_items = static_cast<int>(fwd.size());
        t.bwd_comm_items = static_cast<int>(bwd.size());
        t.recompute_comm_items = rerun_comm ? static_cast<int>(fwd.size()) : 0;
      }
    }
  }
  // A whole-layer graph is one launch per pass: never host-bound.
  if (!whole) host_bound_passes(c, host_launch_s);
  return c;
}

int exchange_nodes(const topo::Cluster& cluster, const std::vector<int>& ep_group) {
  std::vector<int> per_node(static_cast<size_t>(cluster.num_nodes()), 0);
  for (int r : ep_group) ++per_node[static_cast<size_t>(cluster.node_of_rank(r))];
  int nodes = 0, ranks = 0;
  for (int n : per_node) {
    if (n == 0) continue;
    if (ranks > 0 && n != ranks) return 1;
    ranks = n;
    ++nodes;
  }
  return std::max(1, nodes);
}

int flex_exchange_nodes(const models::TrainingPlan& plan, const topo::Cluster& cluster,
                        const std::vector<int>& ep_group) {
  const bool flex = plan.moe_dispatcher == models::MoeDispatcher::FLEX && plan.ep > 1;
  return flex ? exchange_nodes(cluster, ep_group) : 1;
}

LayerCostKey layer_cost_key(const models::ModelSpec& model, const models::TrainingPlan& plan,
                            int layer) {
  return {model.layer_kind(layer), models::layer_recomputed(model, plan, layer),
          model.attention_window(layer), models::layer_in_bf16(model, plan, layer)};
}

StageWork cost_stages(const models::ModelSpec& model, const models::TrainingPlan& plan,
                      const topo::KernelTimeModel& kernels, double host_launch_s, int ep_nodes) {
  StageWork work;
  const auto vs_layers = models::virtual_stage_layers(model, plan);
  std::map<LayerCostKey, PassCost> layer_cache;  // identical layers cost once
  int next = 0;
  for (size_t vs = 0; vs < vs_layers.size(); ++vs) {
    std::vector<Unit> us;
    if (vs == 0) {
      const auto ops = models::embedding_ops(model, plan);
      if (!ops.empty())
        us.push_back({"emb", cost_ops(ops, plan, kernels, OpList::EMBEDDING, host_launch_s)});
    }
    for (int i = 0; i < vs_layers[vs]; ++i, ++next) {
      const LayerCostKey key = layer_cost_key(model, plan, next);
      auto it = layer_cache.find(key);
      if (it == layer_cache.end())
        it = layer_cache
                 .emplace(key, cost_ops(models::layer_ops(model, plan, next), plan, kernels,
                                        OpList::LAYER, host_launch_s, key.recomputed, ep_nodes))
                 .first;
      us.push_back({fmt::format("L{}", next), it->second, next});
    }
    if (vs + 1 == vs_layers.size())
      us.push_back({"head", cost_ops(models::head_ops(model, plan), plan, kernels, OpList::HEAD,
                                     host_launch_s, true, ep_nodes)});  // MTP's MoE layer
    PassCost c;
    for (const auto& u : us) c.add(u.cost);
    work.chunk_cost.push_back(std::move(c));
    work.units.push_back(std::move(us));
  }
  return work;
}

}  // namespace loom::strategies
