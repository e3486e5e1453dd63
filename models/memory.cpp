#include "models/memory.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "common/error.hpp"
#include "models/flops.hpp"
#include "models/plan_dtypes.hpp"

namespace loom::models {
namespace {

// NCCL's device memory per communicator, measured: one PyTorch process group per set of
// ranks, each running one all-reduce on 4 A100 on NVLink, took 688 MB per group of 3 or 4
// ranks and 544 MB per group of 2 (NVIDIA/nccl issue #964). NCCL allocates, per channel and
// per connected peer, the LL, LL128 and Simple buffers (Simple: NCCL_BUFFSIZE, 4 MiB) and
// their flags; the memory grows with the channels, not with the ranks beyond a node
// (S. Jeaugey in NVIDIA/nccl issue #986: "more communicators = more memory used").
constexpr double NCCL_COMM_BYTES = 688e6;
constexpr double NCCL_PAIR_COMM_BYTES = 544e6;
// An all-to-all connects every peer: 8 H100 on NVLink went from 1.06 GB to 4.34 GB of NCCL
// memory at the first all_to_all_single, 32 channels per pair of GPUs (NVIDIA/nccl issue
// #1685): 3.28 GB / 7 peers per NVLink peer. Peers across the network get 2 channels each
// (NCCL_NCHANNELS_PER_NET_PEER) against 32: loom counts the NVLink peers of a node (8 GPUs).
constexpr double NCCL_ALLTOALL_PEER_BYTES = 3.28e9 / 7;
constexpr int NCCL_NVLINK_PEERS_MAX = 7;

double sum_saved(const std::vector<OpCost>& ops, bool (*keep)(const OpCost&)) {
  double total = 0;
  for (const OpCost& op : ops)
    if (keep(op)) total += op.saved_bytes;
  return total;
}

bool any_op(const OpCost&) {
  return true;
}
// What the head keeps per micro-batch besides the loss buffers; a multi-token-prediction
// layer in it follows Megatron's selective recompute modules like the model's layers.
double head_saved_bytes(const TrainingPlan& p, const std::vector<OpCost>& head) {
  const bool modules =
      p.recompute == Recompute::SELECTIVE && p.selective_recompute == SelectiveRecompute::ATTENTION;
  double total = 0;
  for (const OpCost& op : head)
    if (op.kind != OpKind::LOSS) total += modules ? selective_saved_bytes(p, op) : op.saved_bytes;
  return total;
}

// Layers per checkpoint under full recompute: recompute_num_layers with the uniform method,
// else 1 (block checkpoints each of its layers).
double uniform_group(const TrainingPlan& p) {
  return p.recompute_method == RecomputeMethod::UNIFORM ? std::max(p.recompute_num_layers, 1) : 1;
}

// What layer `layer` with op list `ops` keeps per micro-batch: everything unless it is
// recomputed; full: its input only; selective: all but the attention core (Megatron) or
// torchtitan's op-level set.
double stored_bytes(const ModelSpec& m, const TrainingPlan& p, const std::vector<OpCost>& ops,
                    int layer) {
  if (!layer_recomputed(m, p, layer)) return sum_saved(ops, any_op);
  // Uniform full recompute checkpoints one input per group of recompute_num_layers layers.
  if (p.recompute == Recompute::FULL) return layer_input_bytes(m, p) / uniform_group(p);
  if (p.selective_recompute == SelectiveRecompute::OP) return op_selective_saved_bytes(m, p, ops);
  double total = 0;
  for (const OpCost& op : ops) total += selective_saved_bytes(p, op);
  return total;
}

// Elements of the logits one GPU holds per micro-batch (tokens x vocab / tp), summed over the
// losses of the head: the main one and each multi-token-prediction module's, whose buffers
// all wait for the backward (Megatron computes the MTP losses in the same forward).
double logit_elements(const TrainingPlan& p, const std::vector<OpCost>& head) {
  double total = 0;
  for (const OpCost& op : head)
    if (op.kind == OpKind::LOSS) total += op.input_bytes / activation_element_bytes(p);
  return total;
}

// Elements of the largest single logit tensor of the head (one loss's).
double largest_logit_elements(const TrainingPlan& p, const std::vector<OpCost>& head) {
  double largest = 0;
  for (const OpCost& op : head)
    if (op.kind == OpKind::LOSS)
      largest = std::max(largest, op.input_bytes / activation_element_bytes(p));
  return largest;
}

// Bytes per logit element the loss keeps from its forward to its backward, and at its peak.
// Fused (Megatron-core fused_cross_entropy, --cross-entropy-loss-fusion): the 16-bit
// logits and one fp32 buffer that becomes the gradient in place: 2 + 4 both times. Eager
// (torch F.cross_entropy(pred.float(), labels), torchtitan's loss_fn): log_softmax saves its
// fp32 output (4); the backward holds it with nll_loss's dense fp32 gradient and
// log_softmax's fp32 input gradient: 3 x 4 = 12 at the peak (the 16-bit logits are freed
// first: torchtitan's train step does `del pred` before backward).
struct LossBytes {
  double kept = 0;
  double peak = 0;
};
LossBytes loss_bytes_per_logit(const TrainingPlan& p) {
  const double act = activation_element_bytes(p);
  if (p.cross_entropy == CrossEntropy::EAGER) return {4, 3 * 4};
  // Unfused (Megatron's default): the fp32 upcast becomes the softmax in place and is saved
  // (4); the 16-bit logits are alive beside it at the upcast.
  if (p.cross_entropy == CrossEntropy::UNFUSED) return {4, act + 4};
  return {act + 4, act + 4};
}

struct OpParams {
  double dense = 0;
  double expert = 0;
};

OpParams sum_params(const std::vector<OpCost>& ops) {
  OpParams p;
  for (const OpCost& op : ops) (op.expert ? p.expert : p.dense) += op.params;
  return p;
}

double communicator_bytes(double ranks) {
  if (ranks <= 1) return 0;
  return ranks == 2 ? NCCL_PAIR_COMM_BYTES : NCCL_COMM_BYTES;
}

}  // namespace

double nccl_communicator_bytes(const ModelSpec& m, const TrainingPlan& p, bool first, bool last) {
  // The groups a Megatron / torchtitan layout runs collectives on, each its own communicator
  // (PyTorch creates one per process group at its first collective): tp; cp (the ring's
  // send/receive); the gradient group dp x cp (DDP, distributed optimizer, FSDP); pp (the
  // batched send/receive of the schedule); the embedding group of the first and last stages
  // when they share a tied embedding; ep (the all-to-all) and the expert gradient group
  // when it differs from dp x cp.
  double bytes = communicator_bytes(p.tp) + communicator_bytes(p.cp) +
                 communicator_bytes(static_cast<double>(p.dp) * p.cp) + communicator_bytes(p.pp);
  if (m.tied_embeddings && p.pp > 1 && (first || last)) bytes += communicator_bytes(2);
  if (p.ep > 1) {
    bytes += communicator_bytes(p.ep) +
             std::min(p.ep - 1, NCCL_NVLINK_PEERS_MAX) * NCCL_ALLTOALL_PEER_BYTES;
    if (p.expert_dp() != static_cast<double>(p.dp) * p.cp)
      bytes += communicator_bytes(p.expert_dp());
  }
  return bytes;
}

BytesPerParameter bytes_per_parameter(const TrainingPlan& plan) {
  BytesPerParameter b;
  const double moment = bytes_per_element(OPTIMIZER_DTYPE);
  const double states = plan.optimizer == Optimizer::ADAM           ? 2 * moment
                        : plan.optimizer == Optimizer::SGD_MOMENTUM ? moment
                                                                    : 0.0;
  b.states = states;
  b.weights = bytes_per_element(parameter_dtype(plan.precision));
  if (plan.precision == Precision::FP32) {
    b.gradients = b.weights;
    return b;
  }
  // Mixed precision: a 16-bit working copy, fp32 master weights in the optimizer.
  b.master = bytes_per_element(OPTIMIZER_DTYPE);
  b.gradients = bytes_per_element(gradient_dtype(plan.precision, plan.grad_dtype));
  // Transformer Engine with fp8: parameters stay bf16 (fp8_model_params off, the default);
  // each linear weight's fp8 cast and its fp8 transpose (for the backward GEMM on Hopper)
  // are cached across micro-batches: 2 more bytes on layer weights. Without the cache
  // (plan.fp8_weight_cache off) no persistent copy exists: each forward casts again.
  if (!plan.fp8_weight_cache) return b;
  if (plan.precision == Precision::FP8) b.fp8_cache = 2 * bytes_per_element(DType::FP8);
  // NVFP4 caches the same two copies in FP4 with an E4M3 scale per 16 elements (weights are
  // 16x16 block-scaled: one scale per 256 elements, NVIDIA arXiv:2509.25149 Sec. 4.1 — the
  // 1-per-16 bound is kept, 3% of the cache).
  if (plan.precision == Precision::NVFP4)
    b.fp8_cache = 2 * (bytes_per_element(DType::FP4) + NVFP4_SCALE_BYTES_PER_ELEMENT);
  return b;
}

BytesPerParameter sharded_bytes_per_parameter(const TrainingPlan& plan, int zero, double group) {
  BytesPerParameter b = bytes_per_parameter(plan);
  if (zero >= 1) {
    b.master /= group;
    b.states /= group;
  }
  if (zero >= 2) b.gradients /= group;
  if (zero >= 3) {
    b.weights /= group;
    b.fp8_cache /= group;
  }
  return b;
}

std::vector<int> virtual_stage_layers(const ModelSpec& m, const TrainingPlan& p) {
  if (!p.pipeline_split.empty()) return p.pipeline_split;
  const int stages = p.pp * p.vpp;
  return std::vector<int>(static_cast<size_t>(stages), m.layers / stages);
}

std::vector<std::vector<int>> stage_layer_indices(const ModelSpec& m, const TrainingPlan& p) {
  const std::vector<int> counts = virtual_stage_layers(m, p);
  std::vector<std::vector<int>> ranks(static_cast<size_t>(p.pp));
  int next = 0;
  for (size_t v = 0; v < counts.size(); ++v) {
    auto& rank = ranks[v % static_cast<size_t>(p.pp)];
    for (int i = 0; i < counts[v]; ++i) rank.push_back(next++);
  }
  return ranks;
}

double stored_layer_activation_bytes(const ModelSpec& m, const TrainingPlan& p, int layer) {
  return stored_bytes(m, p, layer_ops(m, p, layer), layer);
}

namespace {

// PyTorch's CUDACachingAllocator (c10/cuda/CUDACachingAllocator.cpp; the guide "A guide to
// PyTorch's CUDA Caching Allocator", Z. DeVito 2022) never returns a freed segment to the
// device, and splits a cached block to serve smaller requests. A transient that is freed
// and asked for again each iteration (the loss buffers, a gathered FSDP unit, a recomputed
// layer's widest tensor) finds its old block split among tensors that are still alive, and
// a new segment is mapped: the peak reserved memory (what torchtitan and `nvidia-smi`
// report) exceeds the peak allocated by about one such block. loom counts one largest
// transient tensor; block rounding (512 B, 2 MiB pages) is negligible beside it.
double allocator_gap_bytes(const TrainingPlan& p, const std::vector<OpCost>& head, bool last,
                           double widest_layer_tensor, double gathered_unit_bytes) {
  double largest = std::max(widest_layer_tensor, gathered_unit_bytes);
  if (last)
    largest = std::max(largest, 4 * largest_logit_elements(p, head));  // one fp32 logit buffer
  return largest;
}

// The stage's activations: stored tensors of every in-flight micro-batch, plus the larger of
// the two transient peaks, which never coincide: the loss (at the start of a micro-batch's
// backward) and one recomputed layer rematerialised during backward.
void stage_activations(const TrainingPlan& p, const std::vector<OpCost>& embed,
                       const std::vector<OpCost>& head, bool first, bool last, StageMemory& s) {
  double acts = s.layer_activation_bytes * s.inflight_microbatches + s.offload_buffer_bytes;
  if (first) {
    s.embedding_activation_bytes = sum_saved(embed, any_op) * s.inflight_microbatches;
    acts += s.embedding_activation_bytes;
  }
  double loss_peak = 0;
  if (last) {
    s.head_activation_bytes = head_saved_bytes(p, head) * s.inflight_microbatches;
    // The loss backward runs right after its forward, except under GPipe, where every
    // micro-batch's loss tensors wait until all forwards are done.
    const LossBytes per = loss_bytes_per_logit(p);
    const double elements = logit_elements(p, head);
    const double waiting = p.schedule == Schedule::GPIPE ? s.inflight_microbatches - 1 : 0.0;
    loss_peak = elements * (per.peak + waiting * per.kept);
    s.logits_bytes = loss_peak;
    acts += s.head_activation_bytes;
  }
  s.activations_bytes = acts + std::max(loss_peak, s.recompute_working_bytes);
}

// DeepSpeed's offload (deepspeed/runtime/zero/stage_1_and_2.py, stage3.py) moves model state
// of this GPU's `partition` (parameters it owns after ZeRO: dense / dp + experts / edp) to
// host memory:
//   offload_optimizer  the fp32 master partition and the optimizer states (the whole
//                      optimizer column); the fp32 gradient partition the CPU step reads
//                      (single_partition_of_fp32_groups[i].grad, fp32_partitioned_groups_flat
//                      [i].grad) replaces the GPU's gradient partition under ZeRO-2 and 3 (ZeRO-1
//                      keeps full gradients on the GPU); ZeRO-3 also keeps its partition's
//                      accumulation buffer there (grad_partitions_flat_buffer, on the
//                      optimizer's device), ZeRO-1/2 with accumulation a 16-bit buffer per
//                      partition element (accumulated_grads_in_cpu).
//   offload_param      the 16-bit parameter partition (ZeRO-3); the gathered buffers stay.
void offload_to_host(const TrainingPlan& p, double partition, double dense, double expert,
                     const BytesPerParameter& dense_b, const BytesPerParameter& expert_b,
                     StageMemory& s) {
  if (p.offload_optimizer == Offload::CPU) {
    s.host_optimizer_bytes = s.optimizer_bytes;
    s.optimizer_bytes = 0;
    const double sharded_grads = dense * dense_b.gradients + expert * expert_b.gradients;
    s.host_gradient_bytes = partition * bytes_per_element(OPTIMIZER_DTYPE);
    if (p.zero >= 2) s.gradients_bytes -= sharded_grads;
    if (p.zero >= 3)
      s.host_gradient_bytes += sharded_grads;
    else if (p.micro_batches() > 1)
      s.host_gradient_bytes += partition * bytes_per_element(parameter_dtype(p.precision));
  }
  if (p.offload_param == Offload::CPU && p.zero >= 3) {
    s.host_param_bytes = dense * dense_b.weights + expert * expert_b.weights;
    s.weights_bytes -= s.host_param_bytes;
  }
  s.host_bytes = s.host_optimizer_bytes + s.host_gradient_bytes + s.host_param_bytes;
}

}  // namespace

const LayerMemoryFacts& MemoryOps::layer(const ModelSpec& m, const TrainingPlan& p,
                                         int layer_index) const {
  return layers[static_cast<size_t>(m.layer_kind(layer_index))]
               [layer_recomputed(m, p, layer_index) ? 1 : 0]
               [layer_in_bf16(m, p, layer_index) ? 1 : 0];
}

MemoryOps memory_ops(const ModelSpec& m, const TrainingPlan& p) {
  MemoryOps out;
  out.embedding = embedding_ops(m, p);
  out.head = head_ops(m, p);
  out.total_parameters = count_parameters(m).total;
  // A layer's memory depends on its index only through these three (flops.cpp,
  // recompute.cpp; the attention window changes FLOPs, not what is stored).
  bool filled[LAYER_KINDS][2][2] = {};
  for (int l = 0; l < m.layers; ++l) {
    const auto kind = static_cast<size_t>(m.layer_kind(l));
    const int rec = layer_recomputed(m, p, l) ? 1 : 0;
    const int bf16 = layer_in_bf16(m, p, l) ? 1 : 0;
    if (filled[kind][rec][bf16]) continue;
    filled[kind][rec][bf16] = true;
    const auto ops = layer_ops(m, p, l);
    LayerMemoryFacts& f = out.layers[kind][rec][bf16];
    const OpParams lp = sum_params(ops);
    f.dense_params = lp.dense;
    f.expert_params = lp.expert;
    f.stored_bytes = stored_bytes(m, p, ops, l);
    // A recomputed layer rematerialises, during its backward, what it did not keep; a uniform
    // group re-runs its layers together, holding all of them.
    if (rec)
      f.recompute_working_bytes =
          (p.recompute == Recompute::FULL ? uniform_group(p) : 1) * sum_saved(ops, any_op) -
          f.stored_bytes;
    for (const OpCost& op : ops)
      f.widest_tensor_bytes = std::max(f.widest_tensor_bytes, op.output_bytes);
  }
  return out;
}

MemoryReport estimate_memory(const ModelSpec& m, const TrainingPlan& p,
                             const std::vector<double>& in_flight) {
  validate_model(m);
  return estimate_memory(m, p, in_flight, memory_ops(m, p));
}

MemoryReport estimate_memory(const ModelSpec& m, const TrainingPlan& p,
                             const std::vector<double>& in_flight, const MemoryOps& mops) {
  validate_model(m);
  if (in_flight.size() != static_cast<size_t>(p.pp)) {
    throw ValidationError("in_flight", fmt::format("{} in-flight counts for {} pipeline stages; "
                                                   "give one per stage",
                                                   in_flight.size(), p.pp));
  }
  MemoryReport report;
  report.parameters = mops.total_parameters;
  report.bytes_per_param = bytes_per_parameter(p);
  const double dense_group = static_cast<double>(p.dp) * p.cp;
  const double expert_group = p.expert_dp();  // tp x dp x cp / (etp x ep)
  const BytesPerParameter dense_b = sharded_bytes_per_parameter(p, p.zero, dense_group);
  const BytesPerParameter expert_b = sharded_bytes_per_parameter(p, p.zero, expert_group);
  const auto ranks = stage_layer_indices(m, p);
  const auto& embed = mops.embedding;
  const auto& head = mops.head;
  // Pipeline send + receive buffers, the same on every stage.
  const double pipeline_buffer_bytes = p.pp > 1 ? 2 * layer_input_bytes(m, p) : 0.0;

  for (int r = 0; r < p.pp; ++r) {
    StageMemory s;
    s.stage = r;
    s.layers = ranks[static_cast<size_t>(r)];
    const bool first = r == 0, last = r == p.pp - 1;
    OpParams layer_params, edge_params;
    OpParams cast_params;  // of layers whose linears hold fp8 / fp4 weight casts
    double largest_layer = 0, widest_tensor = 0;
    double offloaded = 0, largest_offloaded = 0;  // per micro-batch
    const Bf16Layers kept = bf16_layers(m, p);
    for (int l : s.layers) {
      const LayerMemoryFacts& f = mops.layer(m, p, l);
      layer_params.dense += f.dense_params;
      layer_params.expert += f.expert_params;
      if (!kept.contains(l)) {
        cast_params.dense += f.dense_params;
        cast_params.expert += f.expert_params;
      }
      largest_layer = std::max(largest_layer, f.dense_params + f.expert_params);
      if (l < p.cpu_offloading_num_layers) {
        // Transformer Engine's CPU offload (double-buffered): the layer's saved tensors go to
        // the host after its forward; two layers' worth are on the GPU at most (one being
        // copied out or in, the next being produced or prefetched).
        offloaded += f.stored_bytes;
        largest_offloaded = std::max(largest_offloaded, f.stored_bytes);
      } else {
        s.layer_activation_bytes += f.stored_bytes;
      }
      s.recompute_working_bytes = std::max(s.recompute_working_bytes, f.recompute_working_bytes);
      widest_tensor = std::max(widest_tensor, f.widest_tensor_bytes);
    }
    if (first) edge_params.dense += sum_params(embed).dense;
    if (last) {  // the head, with any multi-token-prediction layer (its experts included)
      const OpParams hp = sum_params(head);
      edge_params.dense += hp.dense;
      layer_params.expert += hp.expert;
      // The multi-token-prediction modules' quantised linears hold casts too (the LM head
      // does not: it stays 16-bit; keep_mtp_in_bf16 leaves them unquantised).
      for (const OpCost& op : head) {
        if (!op.fp8_linear) continue;
        (op.expert ? cast_params.expert : cast_params.dense) += op.params;
      }
    }
    s.expert_parameters = layer_params.expert;
    s.parameters = layer_params.dense + layer_params.expert + edge_params.dense;
    const double dense = layer_params.dense + edge_params.dense;
    const double expert = layer_params.expert;

    s.weights_bytes = dense * dense_b.weights + expert * expert_b.weights +
                      cast_params.dense * dense_b.fp8_cache +
                      cast_params.expert * expert_b.fp8_cache;
    s.gradients_bytes = dense * dense_b.gradients + expert * expert_b.gradients;
    double gathered_unit = 0, grad_buffers = 0;
    if (p.zero == 3 && dense_group > 1) {
      // FSDP2 (torch.distributed.fsdp.fully_shard; torchtitan wraps each block and the root
      // holding the embedding and LM head): the root's parameters stay gathered from the
      // start of backward to its end; each block is gathered while in use and the next one
      // is prefetched (implicit prefetch), so two block units plus the root are unsharded.
      // A block's backward produces its unsharded gradients (compute dtype) and the
      // reduce-scatter input in the reduce dtype (grad dtype): one block's worth of each.
      const double w = report.bytes_per_param.weights;
      gathered_unit = std::max(largest_layer, edge_params.dense) * w;
      s.zero3_buffer_bytes = (edge_params.dense + 2 * largest_layer) * w;
      s.weights_bytes += s.zero3_buffer_bytes;
      grad_buffers =
          largest_layer * (activation_element_bytes(p) + report.bytes_per_param.gradients);
    }
    s.optimizer_bytes = dense * dense_b.optimizer() + expert * expert_b.optimizer();
    offload_to_host(p, dense / dense_group + expert / expert_group, dense, expert, dense_b,
                    expert_b, s);

    s.inflight_microbatches = in_flight[static_cast<size_t>(r)];
    s.offloaded_activation_bytes = offloaded * s.inflight_microbatches;
    s.offload_buffer_bytes = largest_offloaded * std::min(p.cpu_offloading_num_layers, 2);
    stage_activations(p, embed, head, first, last, s);
    // The FSDP gradient buffers live during a block's backward, with the recomputed layer,
    // not during the loss: they count where that phase exceeds the loss peak.
    s.zero3_grad_buffer_bytes =
        std::max(0.0, s.recompute_working_bytes + grad_buffers -
                          std::max(s.logits_bytes, s.recompute_working_bytes));
    s.gradients_bytes += s.zero3_grad_buffer_bytes;

    s.other.cuda_context_bytes = p.cuda_context_bytes;
    s.other.comm_buffer_bytes = nccl_communicator_bytes(m, p, first, last) + pipeline_buffer_bytes;
    const double rest = s.weights_bytes + s.gradients_bytes + s.optimizer_bytes +
                        s.activations_bytes + s.other.cuda_context_bytes +
                        s.other.comm_buffer_bytes;
    s.other.fragmentation_bytes = allocator_gap_bytes(p, head, last, widest_tensor, gathered_unit) +
                                  p.fragmentation_fraction * rest;
    s.other_bytes = s.other.total();
    s.total_bytes = rest + s.other.fragmentation_bytes;
    if (s.total_bytes > report.peak_bytes) {
      report.peak_bytes = s.total_bytes;
      report.peak_stage = r;
    }
    report.peak_host_bytes = std::max(report.peak_host_bytes, s.host_bytes);
    report.stages.push_back(std::move(s));
  }
  return report;
}

double optimizer_step_bytes_per_param(const TrainingPlan& plan) {
  const double copy = plan.precision == Precision::FP32 ? 0 : 2;
  switch (plan.optimizer) {
    case Optimizer::ADAM:
      return 28 + copy;
    case Optimizer::SGD_MOMENTUM:
      return 20 + copy;
    case Optimizer::SGD:
      return 12 + copy;
  }
  return 28 + copy;
}

}  // namespace loom::models
