// Recompute: which layers and ops a plan re-runs (Megatron full, selective modules,
// torchtitan's op-level policy and every-k-th layer), their extra forward FLOPs and what
// selective recompute keeps (declared in models/flops.hpp).
#include <algorithm>

#include "models/flops.hpp"
#include "models/memory.hpp"

namespace loom::models {
namespace {

// Bytes of the matmul outputs torchtitan's op policy recomputes (the even-numbered ones),
// counting from `mm` matmuls already seen in the layer.
double recomputed_parts(const OpCost& op, int& mm) {
  double total = 0;
  for (double part : op.output_parts) {
    if (part <= 0) continue;
    if (++mm % 2 == 0) total += part;
  }
  return total;
}

}  // namespace

void apply_recompute(const ModelSpec& model, const TrainingPlan& plan, int layer_index,
                     std::vector<OpCost>& ops) {
  if (!layer_recomputed(model, plan, layer_index)) return;
  if (plan.recompute == Recompute::FULL) {
    for (OpCost& op : ops) op.recompute_flops = op.fwd_flops;
    return;
  }
  const std::vector<double> share = selective_rerun_fractions(plan, ops);
  for (size_t i = 0; i < ops.size(); ++i) ops[i].recompute_flops = ops[i].fwd_flops * share[i];
}

bool layer_recomputed(const ModelSpec& model, const TrainingPlan& plan, int layer_index) {
  if (plan.recompute == Recompute::NONE) return false;
  if ((layer_index + 1) % std::max(plan.recompute_every, 1) != 0) return false;
  if (plan.recompute != Recompute::FULL || plan.recompute_method != RecomputeMethod::BLOCK)
    return true;
  // Block: the layer's index within its model chunk.
  int first = 0;
  for (int count : virtual_stage_layers(model, plan)) {
    if (layer_index < first + count) return layer_index - first < plan.recompute_num_layers;
    first += count;
  }
  return false;
}

std::vector<double> selective_rerun_fractions(const TrainingPlan& plan,
                                              const std::vector<OpCost>& ops) {
  std::vector<double> rerun(ops.size(), 0.0);
  if (plan.recompute != Recompute::SELECTIVE) return rerun;
  int mm = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const OpCost& op = ops[i];
    if (plan.selective_recompute != SelectiveRecompute::OP) {
      rerun[i] = (op.rerun_by & plan.recompute_modules) != 0 ? 1.0 : 0.0;
    } else if (op.kind == OpKind::MATMUL) {
      // The even-numbered matmuls' share of the op (a fused projection holds several).
      const double out = op.output_parts[0] + op.output_parts[1] + op.output_parts[2];
      rerun[i] = out > 0 ? recomputed_parts(op, mm) / out : 0.0;
    } else if (op.kind != OpKind::ATTENTION && !op.attention_core) {
      rerun[i] = 1.0;  // memory-bound ops are not in the save list; SDPA's output is
    }
  }
  return rerun;
}

double selective_saved_bytes(const TrainingPlan& plan, const OpCost& op) {
  if (!(op.freed_by & plan.recompute_modules)) return op.saved_bytes;
  return std::min(op.kept_when_freed, op.saved_bytes);
}

double op_selective_saved_bytes(const ModelSpec& model, const TrainingPlan& plan,
                                const std::vector<OpCost>& ops) {
  // torchtitan/models/llama3/parallelize.py (_save_list, _custom_policy): aten.mm and the
  // SDPA kernels are saved "except every second mm"; checkpoint() keeps the block input.
  double saved = layer_input_bytes(model, plan), attention_out = 0;
  int mm = 0;
  for (const OpCost& op : ops) {
    if (op.kind == OpKind::MATMUL) {
      const double out = op.output_parts[0] + op.output_parts[1] + op.output_parts[2];
      saved += out - recomputed_parts(op, mm);
    } else if (op.attention_core && op.kind == OpKind::ATTENTION) {
      attention_out = op.output_bytes;  // the last one is attention x V: SDPA's output
    } else if (op.attention_core) {
      saved += op.saved_bytes;  // the softmax statistics (flash: fp32 log-sum-exp)
    }
  }
  return saved + attention_out;
}

}  // namespace loom::models
