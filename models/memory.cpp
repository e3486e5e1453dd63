#include "models/memory.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "common/error.hpp"
#include "models/flops.hpp"
#include "models/plan_dtypes.hpp"

namespace loom::models {
namespace {

// NCCL allocates NCCL_BUFFSIZE (4 MiB by default, NCCL environment-variable docs) per
// channel and direction for each communicator; loom assumes 8 channels: 2 x 8 x 4 MiB.
constexpr double NCCL_BUFFERS_PER_GROUP_BYTES = 2.0 * 8 * 4 * 1024 * 1024;

double sum_saved(const std::vector<OpCost>& ops, bool (*keep)(const OpCost&)) {
  double total = 0;
  for (const OpCost& op : ops)
    if (keep(op)) total += op.saved_bytes;
  return total;
}

bool any_op(const OpCost&) {
  return true;
}
bool core_op(const OpCost& op) {
  return op.attention_core;
}
bool non_core_op(const OpCost& op) {
  return !op.attention_core;
}
bool non_loss_op(const OpCost& op) {
  return op.kind != OpKind::LOSS;
}
bool loss_op(const OpCost& op) {
  return op.kind == OpKind::LOSS;
}

// What a layer with op list `ops` keeps per micro-batch under plan.recompute (full: its
// input only; selective: all but the attention core).
double stored_bytes(const ModelSpec& m, const TrainingPlan& p, const std::vector<OpCost>& ops) {
  if (p.recompute == Recompute::FULL) return layer_input_bytes(m, p);
  return sum_saved(ops, p.recompute == Recompute::SELECTIVE ? non_core_op : any_op);
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

}  // namespace

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
  // are cached across micro-batches: 2 more bytes on layer weights.
  if (plan.precision == Precision::FP8) b.fp8_cache = 2 * bytes_per_element(DType::FP8);
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
  if (p.recompute == Recompute::FULL) return layer_input_bytes(m, p);
  return stored_bytes(m, p, layer_ops(m, p, layer));
}

MemoryReport estimate_memory(const ModelSpec& m, const TrainingPlan& p,
                             const std::vector<double>& in_flight) {
  validate_model(m);
  if (in_flight.size() != static_cast<size_t>(p.pp)) {
    throw ValidationError("in_flight", fmt::format("{} in-flight counts for {} pipeline stages; "
                                                   "give one per stage",
                                                   in_flight.size(), p.pp));
  }
  MemoryReport report;
  report.parameters = count_parameters(m).total;
  report.bytes_per_param = bytes_per_parameter(p);
  const double dense_group = static_cast<double>(p.dp) * p.cp;
  const double expert_group = dense_group / p.ep;
  const BytesPerParameter dense_b = sharded_bytes_per_parameter(p, p.zero, dense_group);
  const BytesPerParameter expert_b = sharded_bytes_per_parameter(p, p.zero, expert_group);
  const auto ranks = stage_layer_indices(m, p);
  const auto embed = embedding_ops(m, p);
  const auto head = head_ops(m, p);
  // The same on every stage: NCCL buffers per process group, pipeline send + receive.
  int groups = 0;
  for (int size : {p.tp, p.cp, p.dp, p.ep, p.pp})
    if (size > 1) ++groups;
  double comm_buffer_bytes = groups * NCCL_BUFFERS_PER_GROUP_BYTES;
  if (p.pp > 1) comm_buffer_bytes += 2 * layer_input_bytes(m, p);

  for (int r = 0; r < p.pp; ++r) {
    StageMemory s;
    s.stage = r;
    s.layers = ranks[static_cast<size_t>(r)];
    const bool first = r == 0, last = r == p.pp - 1;
    OpParams layer_params, edge_params;
    double largest_unit = 0;
    double full_layer_max = 0, core_layer_max = 0;
    for (int l : s.layers) {
      const auto ops = layer_ops(m, p, l);
      OpParams lp = sum_params(ops);
      layer_params.dense += lp.dense;
      layer_params.expert += lp.expert;
      largest_unit = std::max(largest_unit, lp.dense + lp.expert);
      s.layer_activation_bytes += stored_bytes(m, p, ops);
      full_layer_max = std::max(full_layer_max, sum_saved(ops, any_op));
      core_layer_max = std::max(core_layer_max, sum_saved(ops, core_op));
    }
    if (first) {
      OpParams e = sum_params(embed);
      edge_params.dense += e.dense;
      largest_unit = std::max(largest_unit, e.dense);
    }
    if (last) {
      OpParams h = sum_params(head);
      edge_params.dense += h.dense;
      largest_unit = std::max(largest_unit, h.dense);
    }
    s.expert_parameters = layer_params.expert;
    s.parameters = layer_params.dense + layer_params.expert + edge_params.dense;
    const double dense = layer_params.dense + edge_params.dense;
    const double expert = layer_params.expert;

    s.weights_bytes = dense * dense_b.weights + expert * expert_b.weights +
                      layer_params.dense * dense_b.fp8_cache + expert * expert_b.fp8_cache;
    if (p.zero == 3 && dense_group > 1) {
      // FSDP / ZeRO-3 gathers one wrapped unit (a layer, or the embedding / LM head) at a
      // time and prefetches the next: two full units of 16-bit (or fp32) weights.
      s.zero3_buffer_bytes = 2 * largest_unit * report.bytes_per_param.weights;
      s.weights_bytes += s.zero3_buffer_bytes;
    }
    s.gradients_bytes = dense * dense_b.gradients + expert * expert_b.gradients;
    s.optimizer_bytes = dense * dense_b.optimizer() + expert * expert_b.optimizer();

    s.inflight_microbatches = in_flight[static_cast<size_t>(r)];
    double acts = s.layer_activation_bytes * s.inflight_microbatches;
    if (first) {
      s.embedding_activation_bytes = sum_saved(embed, any_op) * s.inflight_microbatches;
      acts += s.embedding_activation_bytes;
    }
    if (last) {
      s.head_activation_bytes = sum_saved(head, non_loss_op) * s.inflight_microbatches;
      // The loss backward runs right after its forward, except under GPipe, where every
      // micro-batch's logits wait until all forwards are done.
      s.logits_bytes = sum_saved(head, loss_op) *
                       (p.schedule == Schedule::GPIPE ? s.inflight_microbatches : 1.0);
      acts += s.head_activation_bytes + s.logits_bytes;
    }
    if (p.recompute == Recompute::FULL) s.recompute_working_bytes = full_layer_max;
    if (p.recompute == Recompute::SELECTIVE) s.recompute_working_bytes = core_layer_max;
    acts += s.recompute_working_bytes;
    s.activations_bytes = acts;

    s.other.cuda_context_bytes = p.cuda_context_bytes;
    s.other.comm_buffer_bytes = comm_buffer_bytes;
    const double rest = s.weights_bytes + s.gradients_bytes + s.optimizer_bytes +
                        s.activations_bytes + s.other.cuda_context_bytes +
                        s.other.comm_buffer_bytes;
    s.other.fragmentation_bytes = p.fragmentation_fraction * rest;
    s.other_bytes = s.other.total();
    s.total_bytes = rest + s.other.fragmentation_bytes;
    if (s.total_bytes > report.peak_bytes) {
      report.peak_bytes = s.total_bytes;
      report.peak_stage = r;
    }
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
