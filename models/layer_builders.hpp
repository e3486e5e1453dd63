#pragma once
// The builders the op lists of flops.cpp, attention_ops.cpp and mamba_ops.cpp share (internal
// to models/): the per-GPU context of a plan and the linear, norm, pre-norm and residual ops.
#include <string>
#include <vector>

#include "models/flops.hpp"
#include "models/plan_dtypes.hpp"

namespace loom::models::detail {

/// How a linear layer is split over tensor parallelism.
enum class Parallel { COLUMN, ROW, REPLICATED };

/// The per-GPU quantities every op builder needs.
struct Ctx {
  const ModelSpec& m;
  const TrainingPlan& p;
  double T;        // tokens per GPU per micro-batch (b x s / cp)
  double b;        // micro-batch, sequences
  double sq;       // local query length (s / cp)
  double skv;      // key/value length each query sees (s)
  double t;        // tensor-parallel size
  double seq_div;  // t under sequence parallelism, else 1: divides the "sequence region"
  double act;      // bytes per activation element
  double wbytes;   // bytes per weight element read by layer matmuls
  bool flash;
  Fusion fusion;

  Ctx(const ModelSpec& model, const TrainingPlan& plan)
      : m(model),
        p(plan),
        T(tokens_per_gpu(model, plan)),
        b(static_cast<double>(plan.mbs)),
        sq(static_cast<double>(plan.seq) / plan.cp),
        skv(static_cast<double>(plan.seq)),
        t(plan.tp),
        seq_div(plan.sp ? plan.tp : 1),
        act(activation_element_bytes(plan)),
        wbytes(bytes_per_element(matmul_weight_dtype(plan.precision))),
        flash(plan.flash_attention),
        fusion(plan.fusion) {}

  // The TP collective after a row-parallel (or vocabulary-parallel) op whose full output
  // is `bytes`: an all-reduce, a reduce-scatter with SP, none without TP.
  void tp_reduce(OpCost& op, double bytes) const {
    if (t == 1) return;  // t: this context's split (tp, or etp for routed experts)
    op.comm = p.sp ? CommKind::TP_REDUCE_SCATTER : CommKind::TP_ALL_REDUCE;
    op.comm_bytes = bytes;
  }
};

/// A linear layer over `tokens` rows: COLUMN splits the output features by tp, ROW the
/// input features (its bias stays whole), REPLICATED splits nothing.
OpCost linear(const Ctx& c, std::string name, double tokens, double in, double out,
              Parallel parallel, bool bias, double saved, double weight_bytes_per_elem);

/// Marks `op` as re-run (rerun) and freed down to `kept` bytes (freed) by recompute module `m`.
void tag(OpCost& op, RecomputeModule m, bool rerun, bool freed, double kept = 0);

OpCost norm(const Ctx& c, std::string name, double tokens, double width);

/// The norm before attention, the MLP or the LM head; with SP it works on the sequence shard
/// and its output is all-gathered over TP before the column-parallel projections.
/// `layernorm_recompute`: Megatron's "layernorm" recompute module covers it (a transformer
/// layer's two pre-norms; not the final norm nor a Mamba layer's).
void push_pre_norm(const Ctx& c, const char* name, std::vector<OpCost>& ops,
                   bool layernorm_recompute);

/// The norm of a block's output before its residual add (ModelSpec::sandwich_norms: Gemma's
/// post_attention_layernorm / post_feedforward_layernorm), on the sequence-parallel shard the
/// row-parallel projection's reduce-scatter leaves; nothing for other models.
void push_post_norm(const Ctx& c, const char* name, std::vector<OpCost>& ops);

/// The residual add closing a block (with dropout on the block output for dropout models,
/// keeping a 1-byte mask): it works on the sequence-parallel shard.
void push_residual(const Ctx& c, const char* name, std::vector<OpCost>& ops);

/// A Mamba-2 mixer block (mamba_ops.cpp).
void mamba_ops(const Ctx& c, std::vector<OpCost>& ops);

/// The attention block of layer `layer_index`, from its pre-norm to its residual add
/// (attention_ops.cpp).
void attention_ops(const Ctx& c, int layer_index, std::vector<OpCost>& ops);

}  // namespace loom::models::detail
