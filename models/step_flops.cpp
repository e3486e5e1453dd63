// Whole-step FLOP counts (flops.hpp): the op lists of one "GPU" that holds the whole model
// and the whole global batch, summed under a FLOP convention.
#include "models/flops.hpp"

namespace loom::models {

StepFlops step_flops(const ModelSpec& model, const TrainingPlan& plan, FlopConvention convention) {
  // One "GPU" holding everything and the whole global batch as one micro-batch: the sums
  // are then the whole step's FLOPs, independent of how the plan splits them.
  TrainingPlan whole = plan;
  whole.tp = whole.cp = whole.ep = whole.dp = whole.pp = 1;
  whole.etp = 0;
  whole.vpp = 1;
  whole.sp = false;
  whole.pipeline_split.clear();
  whole.mbs = plan.global_batch();
  whole.gbs = whole.mbs;
  StepFlops total;
  auto add = [&](const std::vector<OpCost>& ops) {
    for (const OpCost& op : ops) {
      if (!op.is_matmul() && !convention.include_memory_bound) continue;
      double scale = (convention.causal_halving && op.causal) ? 0.5 : 1.0;
      total.forward += scale * op.fwd_flops;
      total.backward += scale * (op.bwd_input_flops + op.bwd_weight_flops);
      total.recompute += scale * op.recompute_flops;
    }
  };
  add(embedding_ops(model, whole));
  for (int l = 0; l < model.layers; ++l) add(layer_ops(model, whole, l));
  add(head_ops(model, whole));
  return total;
}

double model_flops_per_step(const ModelSpec& model, const TrainingPlan& plan,
                            FlopConvention convention) {
  return step_flops(model, plan, convention).model();
}

double hardware_flops_per_step(const ModelSpec& model, const TrainingPlan& plan,
                               FlopConvention convention) {
  return step_flops(model, plan, convention).hardware();
}

}  // namespace loom::models
