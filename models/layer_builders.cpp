#include "models/layer_builders.hpp"

#include <string_view>

#include "models/fused_ops.hpp"

namespace loom::models::detail {

// A linear layer over `tokens` rows: COLUMN splits the output features by tp, ROW the
// input features (its bias stays whole), REPLICATED splits nothing.
OpCost linear(const Ctx& c, std::string name, double tokens, double in, double out,
              Parallel parallel, bool bias, double saved, double weight_bytes_per_elem) {
  OpCost op;
  op.name = std::move(name);
  op.kind = OpKind::MATMUL;
  op.fp8_linear = true;  // the router and the head clear it
  double n = out, k = in, bias_params = bias ? out : 0;
  if (parallel == Parallel::COLUMN) {
    n = out / c.t;
    bias_params /= c.t;
  } else if (parallel == Parallel::ROW) {
    k = in / c.t;
  }
  op.shape = {static_cast<std::int64_t>(tokens), static_cast<std::int64_t>(n),
              static_cast<std::int64_t>(k), 1};
  op.fwd_flops = 2 * tokens * n * k;
  op.bwd_input_flops = op.fwd_flops;
  op.bwd_weight_flops = op.fwd_flops;
  op.params = n * k + bias_params;
  op.weight_bytes = n * k * weight_bytes_per_elem;
  op.input_bytes = c.act * tokens * k;
  op.output_bytes = c.act * tokens * n;
  op.output_parts = {op.output_bytes, 0, 0};
  op.saved_bytes = saved;
  return op;
}

// Marks `op` as re-run (rerun) and freed down to `kept` bytes (freed) by recompute module `m`.
void tag(OpCost& op, RecomputeModule m, bool rerun, bool freed, double kept) {
  if (rerun) op.rerun_by |= module_bit(m);
  if (freed) op.freed_by |= module_bit(m);
  if (freed) op.kept_when_freed = kept;
}

OpCost norm(const Ctx& c, std::string name, double tokens, double width) {
  // Normalisation keeps its input for backward; it runs on the sequence-parallel shard.
  double bytes = c.act * tokens * width;
  OpCost op = elementwise(std::move(name), bytes, bytes, bytes, 5 * tokens * width);
  op.params = c.m.norm_params(width);
  apply_norm_fusion(op, c.m.norm, c.fusion);
  return op;
}

// The norm before attention, the MLP or the LM head; with SP it works on the sequence shard
// and its output is all-gathered over TP before the column-parallel projections.
void push_pre_norm(const Ctx& c, const char* name, std::vector<OpCost>& ops,
                   bool layernorm_recompute) {
  const double h = static_cast<double>(c.m.hidden);
  OpCost ln = norm(c, name, c.T / c.seq_div, h);
  // Megatron's "layernorm" recompute (transformer_layer.py recompute_input_layernorm /
  // recompute_pre_mlp_layernorm) discards the norm's output, which the next linear saved
  // as its input: one h-wide tensor on the sequence shard. The norm keeps its own input.
  if (layernorm_recompute)
    tag(ln, RecomputeModule::LAYERNORM, true, true, ln.saved_bytes - ln.output_bytes);
  if (c.p.sp && c.p.tp > 1) {
    ln.comm = CommKind::TP_ALL_GATHER;
    ln.comm_bytes = c.act * c.T * h;
  }
  ops.push_back(ln);
}

// Gemma's post-block norm: after the row-parallel projection's all-reduce (or, with SP, its
// reduce-scatter) and before the residual add (HF modeling_gemma2.py Gemma2DecoderLayer.forward;
// Megatron-Bridge gemma2_provider.py TERowParallelLinearLayerNorm), so on the sequence shard.
void push_post_norm(const Ctx& c, const char* name, std::vector<OpCost>& ops) {
  if (!c.m.sandwich_norms) return;
  ops.push_back(norm(c, name, c.T / c.seq_div, static_cast<double>(c.m.hidden)));
}

// The residual add closing a block (with dropout on the block output for dropout models,
// keeping a 1-byte mask): it works on the sequence-parallel shard.
void push_residual(const Ctx& c, const char* name, std::vector<OpCost>& ops) {
  const double elements = c.T * static_cast<double>(c.m.hidden) / c.seq_div;
  ops.push_back(residual_op(name, elements, c.act, c.m.dropout, c.fusion));
}

}  // namespace loom::models::detail
