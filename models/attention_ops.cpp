// The attention block of a transformer layer (declared in models/layer_builders.hpp): the
// pre-norm, the Q/K/V projections (or DeepSeek's MLA), query/key norms, the rotary
// embedding, the attention core (flash or unfused, sliding window, soft-capping), the output
// projection, Gemma's post-attention norm and the residual add.
#include <string_view>

#include "common/sliding_window.hpp"
#include "models/fused_ops.hpp"
#include "models/layer_builders.hpp"

namespace loom::models::detail {
namespace {

// The sequence shape of one attention matmul of head dimension `d` (window: the layer's
// sliding window, 0 for full attention).
// Context parallelism decides what one rank's kernel sees (--cp-comm-type): a p2p ring
// (and PyTorch's context_parallel, whose every rotation runs SDPA per K/V chunk) runs cp
// chunk kernels of its s / cp queries; Transformer Engine's all-gather CP runs its local
// queries against the gathered keys in one kernel; an all-to-all CP (Ulysses) the whole
// sequence for its heads / cp (the same FLOPs).
AttentionShape attention_shape(const Ctx& c, double d, std::int64_t window) {
  const CpCommType type = c.p.cp_comm_type;
  const bool ring = type == CpCommType::P2P || type == CpCommType::A2A_P2P ||
                    c.p.framework == Framework::TORCHTITAN;
  const double sq = type == CpCommType::A2A ? c.skv : c.sq;
  return {static_cast<std::int64_t>(sq), static_cast<std::int64_t>(c.skv),
          static_cast<std::int64_t>(d), ring ? c.p.cp : 1, window};
}

// The attention core: scores (+ soft-capping), softmax (+ dropout), attention x V. Q, K and V
// themselves are saved by the projection that produced them. A windowed layer counts only the
// scores its window computes (fused kernels skip the tiles outside it); an unfused one still stores
// the whole masked square.
void attention_core(const Ctx& c, double d_qk, double d_v, std::int64_t window,
                    std::vector<OpCost>& ops) {
  const double heads = c.m.heads / c.t;
  const double full_square = c.b * heads * c.sq * c.skv;  // score elements stored per GPU
  const double square =  // counted for FLOPs (loom::windowed_causal_keys)
      c.b * heads * c.sq * windowed_causal_keys(c.skv, static_cast<double>(window));
  OpCost scores;
  scores.name = "attn_scores";
  scores.kind = OpKind::ATTENTION;
  scores.shape = {static_cast<std::int64_t>(c.sq), static_cast<std::int64_t>(c.skv),
                  static_cast<std::int64_t>(d_qk), static_cast<std::int64_t>(c.b * heads)};
  scores.fwd_flops = 2 * square * d_qk;
  scores.bwd_input_flops = 2 * scores.fwd_flops;
  scores.input_bytes = c.act * c.b * heads * (c.sq + c.skv) * d_qk;
  scores.output_bytes = c.flash ? 0 : c.act * full_square;
  scores.attention = attention_shape(c, d_qk, window);
  scores.attention_core = true;
  scores.causal = true;
  // Gemma 2's attention-logit soft-capping, cap * tanh(score / cap) before the softmax. A
  // flash kernel applies it to each score tile in registers (flash-attn >= 2.6 `softcap`, which
  // HF modeling_gemma2.py passes when is_flash_attn_greater_or_equal("2.6.0")): no tensor, the
  // kernel marked (OpCost::softcap). Unfused (Megatron-Bridge gemma2_provider.py
  // Gemma2DotProductAttention, "use unfused SDPA for attn logit softcapping"; HF eager), it is
  // an elementwise op over the score square that keeps its tanh output for the backward.
  const bool softcap = c.m.attn_logit_softcap > 0;
  scores.softcap = softcap && c.flash;
  ops.push_back(scores);
  if (softcap && !c.flash) {
    OpCost cap = softcap_op("attn_softcap", full_square, c.act, c.fusion);
    cap.attention_core = true;
    ops.push_back(cap);
  }

  // Flash attention keeps only the fp32 log-sum-exp per query row; otherwise the softmax
  // output (16-bit) is stored.
  OpCost softmax = elementwise(
      "attn_softmax", c.flash ? 0 : c.act * full_square, c.flash ? 0 : c.act * full_square,
      c.flash ? 4 * c.b * heads * c.sq : c.act * full_square, 5 * full_square);
  softmax.attention_core = true;
  if (!c.flash) apply_softmax_fusion(softmax, c.fusion);
  ops.push_back(softmax);
  if (c.m.dropout && !c.flash) {
    // A 1-byte mask and the dropped-out probabilities that attention x V reads in backward.
    OpCost drop = elementwise("attn_dropout", c.act * full_square, c.act * full_square,
                              full_square + c.act * full_square, full_square);
    drop.attention_core = true;
    ops.push_back(drop);
  }

  OpCost av;
  av.name = "attn_v";
  av.kind = OpKind::ATTENTION;
  av.shape = {static_cast<std::int64_t>(c.sq), static_cast<std::int64_t>(d_v),
              static_cast<std::int64_t>(c.skv), static_cast<std::int64_t>(c.b * heads)};
  av.fwd_flops = 2 * square * d_v;
  av.bwd_input_flops = 2 * av.fwd_flops;
  av.input_bytes = (c.flash ? 0 : c.act * full_square) + c.act * c.b * heads * c.skv * d_v;
  av.output_bytes = c.act * c.b * heads * c.sq * d_v;
  av.attention = attention_shape(c, d_v, window);
  av.attention_core = true;
  av.causal = true;
  av.softcap = scores.softcap;  // the same fused kernel
  ops.push_back(av);
}

// Rotary embedding of the local queries and keys (RoPE models: no learned positions). MLA
// rotates only the qk_rope_head_dim part: per head for queries, one shared key part.
void push_rope(const Ctx& c, std::vector<OpCost>& ops) {
  const ModelSpec& m = c.m;
  if (m.max_position_embeddings > 0 || !m.rope) return;
  double width = static_cast<double>(m.q_width() + m.k_width()) / c.t;
  if (m.attention == AttentionKind::MLA) {
    const double rope = static_cast<double>(m.mla.qk_rope_head_dim);
    width = m.heads * rope / c.t + rope;
  }
  if (width <= 0) return;
  ops.push_back(rope_op(c.act * c.T * width, c.fusion));
  // MLA's up-projection checkpoint covers the rotary embedding of its outputs too.
  if (m.attention == AttentionKind::MLA) tag(ops.back(), RecomputeModule::MLA_UP_PROJ, true, true);
}

}  // namespace

void attention_ops(const Ctx& c, int layer_index, std::vector<OpCost>& ops) {
  const ModelSpec& m = c.m;
  const double h = static_cast<double>(m.hidden);
  const double T = c.T, seq_in = c.act * T * h / c.seq_div;
  push_pre_norm(c, "attn_norm", ops, true);
  const double qw = static_cast<double>(m.q_width()), kw = static_cast<double>(m.k_width()),
               vw = static_cast<double>(m.v_width());
  const double kv_local = c.act * T * (kw + vw) / c.t;
  if (m.attention == AttentionKind::MLA) {
    const auto& a = m.mla;
    const double qr = static_cast<double>(a.q_lora_rank), kvr = static_cast<double>(a.kv_lora_rank);
    // Megatron's MLA keeps the down-projections whole on every TP rank; the up-projections
    // are column-parallel.
    if (a.q_lora_rank > 0) {
      ops.push_back(linear(c, "q_down", T, h, qr, Parallel::REPLICATED, false, 0, c.wbytes));
      ops.push_back(norm(c, "q_norm", T, qr));
      ops.push_back(linear(c, "q_up", T, qr, qw, Parallel::COLUMN, false,
                           c.act * T * qr + c.act * T * qw / c.t, c.wbytes));
      ops.back().saved_output_bytes = c.act * T * qw / c.t;
      tag(ops.back(), RecomputeModule::MLA_UP_PROJ, true, true, c.act * T * qr);
    } else {
      ops.push_back(
          linear(c, "q_proj", T, h, qw, Parallel::COLUMN, false, c.act * T * qw / c.t, c.wbytes));
      ops.back().saved_output_bytes = c.act * T * qw / c.t;
    }
    ops.push_back(linear(c, "kv_down", T, h, kvr + a.qk_rope_head_dim, Parallel::REPLICATED, false,
                         seq_in, c.wbytes));
    ops.push_back(norm(c, "kv_norm", T, kvr));
    OpCost up = linear(c, "kv_up", T, kvr, m.heads * (a.qk_nope_head_dim + a.v_head_dim),
                       Parallel::COLUMN, false, c.act * T * kvr + kv_local, c.wbytes);
    up.saved_output_bytes = kv_local;
    // Megatron's "mla_up_proj" recompute (multi_latent_attention.py, qkv_up_checkpoint)
    // keeps the compressed latents and discards the up-projected Q, K, V after the core
    // attention's forward, re-running the up-projections before its backward.
    tag(up, RecomputeModule::MLA_UP_PROJ, true, true, c.act * T * kvr);
    ops.push_back(up);
  } else {
    const bool bias = m.linear_bias || m.qkv_bias;
    OpCost qkv = linear(c, "qkv_proj", T, h, qw + kw + vw, Parallel::COLUMN, bias,
                        seq_in + c.act * T * (qw + kw + vw) / c.t, c.wbytes);
    qkv.output_parts = {c.act * T * qw / c.t, c.act * T * kw / c.t, c.act * T * vw / c.t};
    qkv.saved_output_bytes = c.act * T * (qw + kw + vw) / c.t;
    ops.push_back(qkv);
    if (m.qk_norm) {
      double bytes = c.act * T * (qw + kw) / c.t;
      OpCost qk = elementwise("qk_norm", bytes, bytes, bytes, 5 * T * (qw + kw) / c.t);
      qk.params = 2.0 * m.head_dim;
      ops.push_back(qk);
    }
  }
  if (c.p.cp > 1) {
    ops.back().comm = CommKind::CP_KV_EXCHANGE;
    ops.back().comm_bytes = kv_local;
    ops.back().cp_query_bytes = c.act * T * qw / c.t;
    // PyTorch's context_parallel (torchtitan) runs SDPA once per K/V chunk, and autograd
    // keeps each chunk it was given for the backward: the keys and values of the whole
    // sequence stay saved per layer, (cp - 1) chunks beyond the local one, whichever the
    // rotation (torch/distributed/tensor/experimental/_attention.py). Transformer Engine
    // keeps only the local K/V and re-circulates (p2p) or re-gathers (all-gather) them in
    // the backward.
    if (c.p.framework == Framework::TORCHTITAN) ops.back().saved_bytes += (c.p.cp - 1) * kv_local;
  }
  push_rope(c, ops);
  const double d_qk = m.attention == AttentionKind::MLA
                          ? static_cast<double>(m.mla.qk_nope_head_dim + m.mla.qk_rope_head_dim)
                          : static_cast<double>(m.head_dim);
  const double d_v = m.attention == AttentionKind::MLA ? static_cast<double>(m.mla.v_head_dim)
                                                       : static_cast<double>(m.head_dim);
  attention_core(c, d_qk, d_v, m.attention_window(layer_index), ops);
  const double ow = static_cast<double>(m.attn_out_width());
  OpCost out =
      linear(c, "out_proj", T, ow, h, Parallel::ROW, m.linear_bias, c.act * T * ow / c.t, c.wbytes);
  c.tp_reduce(out, c.act * T * h);
  ops.push_back(out);
  push_post_norm(c, "attn_post_norm", ops);
  push_residual(c, "attn_residual", ops);
}

}  // namespace loom::models::detail
