#include "strategies/step/tp_overlap.hpp"

#include <algorithm>

namespace loom::strategies {
namespace {

using models::CommKind;
using models::OpKind;

// Transformer Engine's userbuffers defaults (transformer_engine/pytorch/module/base.py,
// initialize_ub: get_default_config): "pipeline" and "bulk" overlaps split in num_splits = 4
// and run their communication kernels on num_sm = 16 SMs reserved from the GEMM
// (set_sm_margin = True); "ring_exchange" splits in tp_size chunks and moves them with the
// copy engines (use_ce = True, num_sm = 1, no SM margin).
constexpr int TE_PIPELINE_SPLITS = 4;
constexpr int TE_COMM_SMS = 16;
// TE launches chunk i's GEMM on _stream_compute[i % _stream_compute.size()], num_max_streams
// = _NUM_MAX_UB_STREAMS = 3 streams (base.py; comm_gemm_overlap.cpp split_overlap_ag /
// split_overlap_rs). PyTorch's pipelined consumers run on the current stream, one at a time.
constexpr int TE_STREAMS = 3;

TpOverlap ring(int tp, double gemm_s, double chunk_s, int streams) {
  return {TpOverlapMethod::RING, tp, gemm_s, chunk_s, 0, streams};
}

// The first GEMM at or after `from`: the column-parallel linear a gathered activation feeds.
int next_matmul(const std::vector<models::OpCost>& ops, size_t from) {
  for (size_t j = from; j < ops.size(); ++j)
    if (ops[j].kind == OpKind::MATMUL) return static_cast<int>(j);
  return -1;
}

// The context-parallel exchange of op `i` beside the attention kernels after it: a ring of
// cp steps, each step's K/V chunk sent while the previous chunk's attention block runs
// (Transformer Engine attn_forward_func_with_cp, p2p; PyTorch _RotateMethod.ALLTOALL); or
// PyTorch's all-gather rotation, whose one gather runs beside the local chunk's SDPA only
// (_AllGatherRotater waits for it at the first rotation): a bulk overlap with 1 / cp of it.
TpOverlapPair cp_overlap(const std::vector<models::OpCost>& ops, size_t i,
                         const models::TrainingPlan& plan, const ChunkSeconds& seconds) {
  OpPassSeconds attn;
  for (size_t j = i + 1; j < ops.size() && ops[j].kind != OpKind::MATMUL; ++j) {
    if (ops[j].kind != OpKind::ATTENTION) continue;
    const OpPassSeconds t = seconds(ops[j], 1);
    attn.forward += t.forward;
    attn.backward_input += t.backward_input;
  }
  const int cp = plan.cp;
  const auto chunk = [cp](double s) { return s / cp; };
  if (plan.cp_comm_type == models::CpCommType::P2P)
    return {ring(cp, attn.forward, chunk(attn.forward), 1),
            ring(cp, attn.backward_input, chunk(attn.backward_input), 1)};
  return {{TpOverlapMethod::BULK, 1, chunk(attn.forward), chunk(attn.forward), 0, 1},
          {TpOverlapMethod::BULK, 1, chunk(attn.backward_input), chunk(attn.backward_input), 0, 1}};
}

}  // namespace

bool cp_overlapped(const models::TrainingPlan& plan) {
  return plan.cp > 1 && (plan.cp_comm_type == models::CpCommType::P2P ||
                         (plan.framework == models::Framework::TORCHTITAN &&
                          plan.cp_comm_type == models::CpCommType::ALLGATHER));
}

std::vector<TpOverlapPair> tp_overlaps(const std::vector<models::OpCost>& ops,
                                       const models::TrainingPlan& plan,
                                       const ChunkSeconds& seconds) {
  std::vector<TpOverlapPair> out(ops.size());
  if (cp_overlapped(plan)) {
    for (size_t i = 0; i < ops.size(); ++i)
      if (ops[i].comm == CommKind::CP_KV_EXCHANGE) out[i] = cp_overlap(ops, i, plan, seconds);
  }
  if (!plan.tp_comm_overlap || plan.tp <= 1) return out;
  const int tp = plan.tp;
  // torchtitan's async TP (enable_async_tensor_parallel) is PyTorch's micro-pipelined TP:
  // torch.compile's pass (torch/_inductor/fx_passes/micro_pipeline_tp.py) replaces every
  // all-gather -> matmul with fused_all_gather_matmul and every matmul -> reduce-scatter with
  // fused_matmul_reduce_scatter (torch/distributed/_symmetric_memory/__init__.py:
  // _pipelined_all_gather_and_consume, _pipelined_produce_and_all2all), in the forward and
  // the backward graphs alike: tp chunks, one per peer, copied by the copy engines over
  // symmetric memory while the next chunk's matmul runs.
  const bool async_tp = plan.framework == models::Framework::TORCHTITAN;
  const int streams = async_tp ? 1 : TE_STREAMS;
  for (size_t i = 0; i < ops.size(); ++i) {
    const models::OpCost& op = ops[i];
    if (op.comm_bytes <= 0) continue;
    if (op.comm == CommKind::TP_ALL_GATHER) {
      // The gathered activation feeds the next column-parallel linear (qkv / fc1).
      const int j = next_matmul(ops, i + 1);
      if (j < 0 || ops[static_cast<size_t>(j)].expert) continue;
      const auto& gemm = ops[static_cast<size_t>(j)];
      const OpPassSeconds whole = seconds(gemm, 1), part = seconds(gemm, tp);
      // TE: qkv_fprop / fc1_fprop ring_exchange; the backward's reduce-scatter of the dgrad
      // (qkv_wgrad / fc1_wgrad) is a "bulk" overlap beside the independent wgrad GEMM.
      // Async TP: the dgrad matmul -> reduce-scatter fused in tp chunks.
      out[i].fwd = ring(tp, whole.forward, part.forward, streams);
      out[i].bwd = async_tp ? ring(tp, whole.backward_input, part.backward_input, streams)
                            : TpOverlap{TpOverlapMethod::BULK, 1,           whole.backward_weight,
                                        whole.backward_weight, TE_COMM_SMS, 1};
    } else if (op.comm == CommKind::TP_REDUCE_SCATTER && op.kind == OpKind::MATMUL && !op.expert) {
      // The row-parallel linear's own output (proj / fc2). TE: proj_fprop / fc2_fprop
      // "pipeline" (4 splits, 16 comm SMs); the backward's all-gather of the output gradient
      // before the dgrad GEMM (proj_dgrad / fc2_dgrad) a ring_exchange. Async TP: both fused
      // in tp chunks.
      const OpPassSeconds whole = seconds(op, 1);
      const OpPassSeconds part = seconds(op, tp);
      if (async_tp) {
        out[i].fwd = ring(tp, whole.forward, part.forward, streams);
      } else {
        const OpPassSeconds split = seconds(op, TE_PIPELINE_SPLITS);
        out[i].fwd = {TpOverlapMethod::PIPELINE,
                      TE_PIPELINE_SPLITS,
                      whole.forward,
                      split.forward,
                      TE_COMM_SMS,
                      TE_STREAMS};
      }
      out[i].bwd = ring(tp, whole.backward_input, part.backward_input, streams);
    }
    // A TP all-reduce (no sequence parallelism) has no overlapping implementation: TE's
    // userbuffers need sequence parallelism (Megatron-LM asserts it with
    // --tp-comm-overlap), async TP fuses only all-gathers and reduce-scatters.
  }
  return out;
}

double tp_overlap_exposed_s(const TpOverlap& o, double comm_s, int sm_count) {
  // A GEMM that leaves `comm_sms` of the SMs to communication kernels runs on the rest.
  const double margin = o.comm_sms > 0 && sm_count > o.comm_sms
                            ? static_cast<double>(sm_count) / (sm_count - o.comm_sms)
                            : 1.0;
  const double n = std::max(o.chunks, 1);
  const double g = o.chunk_gemm_s * margin;
  const double e = std::max(o.gemm_s * margin / n, g / std::max(o.streams, 1));
  switch (o.method) {
    case TpOverlapMethod::NONE:
      return comm_s;
    case TpOverlapMethod::RING: {
      if (n < 2) return comm_s;
      // n chunks, n - 1 exchange steps of one chunk each: the first chunk's GEMM runs on the
      // local shard while the first exchange proceeds; each later chunk's GEMM waits for its
      // exchange.
      // One exchange step moves one chunk to the next rank: the traffic of one step of the
      // ring all-gather the collective is timed as, C / (n - 1).
      const double c = comm_s / (n - 1);
      return std::max(0.0, g + (n - 1) * std::max(c, e) - o.gemm_s);
    }
    case TpOverlapMethod::PIPELINE:
      // Each chunk's collective follows its GEMM; the last chunk's collective has no GEMM
      // left to hide behind.
      {
        // Userbuffers' reduce-scatter kernels write the peers' buffers over NVLink directly,
        // outside NCCL's protocols: a chunk costs its share of the whole collective, C / n.
        const double c = comm_s / n;
        return std::max(0.0, g + (n - 1) * std::max(c, e) + c - o.gemm_s);
      }
    case TpOverlapMethod::BULK:
      return std::max(0.0, std::max(comm_s, o.gemm_s * margin) - o.gemm_s);
  }
  return comm_s;
}

}  // namespace loom::strategies
