#include "models/flops.hpp"

#include <algorithm>
#include <string_view>

#include "common/error.hpp"
#include "models/fused_ops.hpp"
#include "models/layer_builders.hpp"
#include "models/moe_routing.hpp"
#include "models/plan_dtypes.hpp"

namespace loom::models {
namespace {

using detail::attention_ops;
using detail::Ctx;
using detail::linear;
using detail::norm;
using detail::Parallel;
using detail::push_pre_norm;
using detail::push_residual;
using detail::tag;

// A (possibly gated) MLP of intermediate size f over `tokens` rows of `h` features (the
// hidden size, or a latent routed expert's width), column- then row-parallel.
void mlp_block(const Ctx& c, const std::string& prefix, double tokens, double h, double f,
               bool bias, double input_saved, bool expert, double batch, std::vector<OpCost>& ops) {
  const bool gated = gated_mlp(c.m.mlp);
  const double up_width = gated ? 2 * f : f;
  const double inner = c.act * tokens * f / c.t;  // one f-wide activation on this GPU, bytes
  OpCost up =
      linear(c, prefix + "_up", tokens, h, up_width, Parallel::COLUMN, bias, input_saved, c.wbytes);
  // torchtitan's FeedForward runs the gate (w1) and up (w3) projections as two matmuls.
  if (gated) up.output_parts = {inner, inner, 0};
  // Reported FLOPs per output element: SiLU and the gate product 6, the tanh GELU 8 (its
  // cubic, tanh and scalings), GeGLU that and the product 9.
  const double act_flops = c.m.mlp == MlpKind::SWIGLU ? 6 : c.m.mlp == MlpKind::GEGLU ? 9 : 8;
  OpCost act = elementwise(prefix + "_act", c.act * tokens * up_width / c.t, inner,
                           c.act * tokens * up_width / c.t, act_flops * tokens * f / c.t);
  apply_activation_fusion(act, c.m.mlp, bias, c.fusion);
  const std::optional<OpCost> clamp =
      gated && c.m.activation_clamp > 0
          ? activation_clamp_op(prefix + "_act_clamp", inner, c.fusion)
          : std::nullopt;
  OpCost down = linear(c, prefix + "_down", tokens, f, h, Parallel::ROW, bias, inner, c.wbytes);
  if (expert) {
    for (OpCost* op : {&up, &down}) {
      op->expert = true;
      op->params *= batch;
      op->weight_bytes *= batch;
      op->shape.batch = static_cast<std::int64_t>(batch);
      op->shape.m = static_cast<std::int64_t>(tokens / batch);
    }
  }
  c.tp_reduce(down, c.act * tokens * h);
  ops.push_back(up);
  if (clamp) ops.push_back(*clamp);
  ops.push_back(act);
  ops.push_back(down);
}

// Megatron's "moe" recompute checkpoints the whole MoE block from `first` (router, dispatch,
// experts, combine, shared experts: moe_layer.py), keeping the router's input; "moe_act"
// re-runs the routed experts' activation (experts.py TEGroupedMLP, activation_recompute),
// freeing its output, which the down-projection saved. The checkpoint takes the up
// projection's output: with a clamp (ModelSpec::activation_clamp) the clamp keeps it and the
// activation's own saved input, the clamped copy, is freed.
void tag_moe_recompute(double router_input, size_t first, std::vector<OpCost>& ops) {
  bool clamped = false;
  for (size_t i = first; i < ops.size(); ++i) {
    tag(ops[i], RecomputeModule::MOE, true, true, i == first ? router_input : 0);
    if (ops[i].name == "expert_act_clamp") {
      tag(ops[i], RecomputeModule::MOE_ACT, true, false);
      clamped = true;
    }
    if (ops[i].name == "expert_act") tag(ops[i], RecomputeModule::MOE_ACT, true, clamped);
    if (ops[i].name == "expert_down") tag(ops[i], RecomputeModule::MOE_ACT, false, true);
  }
}

void mlp_ops(const Ctx& c, int layer_index, std::vector<OpCost>& ops) {
  const ModelSpec& m = c.m;
  const double h = static_cast<double>(m.hidden);
  const double T = c.T, seq_in = c.act * T * h / c.seq_div;
  push_pre_norm(c, "mlp_norm", ops, true);
  const size_t first = ops.size();
  if (!m.is_moe_layer(layer_index)) {
    mlp_block(c, "mlp", T, h, static_cast<double>(m.ffn), m.linear_bias, seq_in, false, 1, ops);
    // Gemma's post-feedforward norm belongs to the MLP module (Megatron-Bridge gemma2_provider.py:
    // linear_fc2 is a TERowParallelLinearLayerNorm), so the "mlp" recompute covers it.
    detail::push_post_norm(c, "mlp_post_norm", ops);
    // Megatron's "mlp" recompute checkpoints a dense layer's MLP (not an MoE layer's:
    // transformer_layer.py `if not self.is_moe_layer`); the checkpoint keeps its input.
    for (size_t i = first; i < ops.size(); ++i)
      tag(ops[i], RecomputeModule::MLP, true, true, i == first ? seq_in : 0);
    push_residual(c, "mlp_residual", ops);
    for (size_t i = first - 1; i < ops.size(); ++i) ops[i].graph_module = GraphModule::MLP;
  } else {
    const double E = m.moe.experts, k = m.moe.top_k;
    const double local_tokens = T / c.seq_div;
    // Routed token copies one GPU processes: each GPU sends T x top_k copies and, with
    // balanced routing, receives as many (scaled by the capacity factor). Experts are split
    // by etp (expert tensor parallelism; Megatron's default etp = tp) and by ep. With
    // etp < tp the TP ranks route their sequence-parallel shards apart: an etp group sees
    // etp / tp of the copies, at ffn / etp width (Megatron-core MoEAlltoAllTokenDispatcher
    // gathers tokens over the expert-TP group only), so FLOPs per GPU are unchanged.
    const double etp = c.p.expert_tp();
    const double R = T * k * m.moe.capacity_factor * etp / c.t;
    const double local_experts = E / c.p.ep;
    Ctx ec = c;  // the routed experts' split
    ec.t = etp;
    OpCost router = linear(c, "router", local_tokens, h, E, Parallel::REPLICATED, m.moe.router_bias,
                           c.act * local_tokens * h + 4 * local_tokens * E, c.act);
    router.fp8_linear = false;  // Megatron's TopKRouter is a plain (not TE) linear
    if (m.moe.shared_expert_gate) router.params += h;
    // Megatron's partial CUDA graphs: "moe_router" captures the pre-MLP norm, the router and
    // the shared experts, "moe_preprocess" the dispatcher's preprocessing; the dispatch,
    // routed experts and combine have dynamic shapes (tokens per expert) and stay eager, as
    // does the residual add after them.
    ops[first - 1].graph_module = router.graph_module = GraphModule::MOE_ROUTER;
    ops.push_back(router);
    ops.push_back(router_topk_op(local_tokens, E, k, c.fusion));
    ops.back().graph_module = GraphModule::MOE_ROUTER;
    ops.push_back(dispatch_preprocess_op(local_tokens, E, c.p.ep > 1 || etp > 1));
    ops.back().graph_module = GraphModule::MOE_PREPROCESS;
    // LatentMoE (Megatron-core moe_layer.py): the routed experts work at the latent width
    // `eh`; fc1_latent_proj (a TE linear duplicated on every TP rank) maps the tokens to it
    // before the dispatch, so they travel at that width, and fc2_latent_proj maps the
    // combined outputs back. The router and the shared experts read the hidden state.
    const double eh = static_cast<double>(m.expert_width());
    const bool latent = m.moe.latent > 0;
    if (latent) {
      // Its input is the router's, which keeps it already.
      ops.push_back(
          linear(c, "latent_down", local_tokens, h, eh, Parallel::REPLICATED, false, 0, c.wbytes));
    }
    const size_t routed = ops.size();
    // The all-to-all dispatcher sends every routed copy; a flex one (DeepEP, HybridEP) each
    // token once per GPU and node its experts are on (pass_cost.cpp expands that).
    const bool flex = c.p.moe_dispatcher == MoeDispatcher::FLEX;
    const auto exchange = [&](OpCost& op) {
      if (c.p.ep <= 1) return;
      op.comm = flex ? CommKind::EP_TOKEN_EXCHANGE : CommKind::EP_ALL_TO_ALL;
      op.comm_bytes = flex ? c.act * local_tokens * eh : c.act * R * eh;
      op.routing = m.moe;
    };
    // The permute that lays the routed copies out by expert reads the tokens it has: all of
    // the GPU's own before an all-to-all dispatch; after a flex exchange the tokens it
    // received, each once per destination GPU (its top-k experts reach `reached` GPUs of the
    // EP group): Megatron-core token_dispatcher.py _DeepepManager
    // get_permuted_hidden_states_by_experts permutes DeepEP's receive buffer, and HybridEP's
    // dispatch_with_permute launches a permute kernel over its receive buffer after the
    // exchange (DeepEP hybrid-ep Executor::dispatch_postprocess; its fused permute is opt-in
    // and not modelled). The unpermute before the combine writes as many rows back. A
    // permute's backward is the inverse permute, the same bytes once.
    const double reached = flex && c.p.ep > 1 ? expected_blocks_reached(m.moe, c.p.ep) : 1.0;
    const double held = c.act * T * eh * etp / c.t * reached;
    const auto permute = [&](std::string name, double in, double out, double saved, double flops) {
      OpCost op = elementwise(std::move(name), in, out, saved, flops);
      op.backward_bytes = op.input_bytes + op.output_bytes;
      return op;
    };
    OpCost dispatch = permute("moe_dispatch", held, c.act * R * eh, 0, 0);
    exchange(dispatch);
    ops.push_back(dispatch);
    // Megatron's all-to-all dispatcher sends each routed copy's fp32 router probability in an
    // all-to-all of its own (token_dispatcher.py token_dispatch: "global_probs =
    // all_to_all(self.ep_group, permuted_probs, ...)"), its backward the gradients back; the
    // flex dispatchers carry them in their exchange. torchtitan and DeepSpeed weight the
    // outputs by the scores on the token's own GPU: their all-to-alls carry tokens only.
    const bool probs_travel =
        c.p.framework != Framework::TORCHTITAN && c.p.framework != Framework::DEEPSPEED;
    if (!flex && c.p.ep > 1 && probs_travel) {
      OpCost probs = elementwise("moe_probs_dispatch", 0, 0, 0, 0);
      probs.kernels = 0;
      probs.comm = CommKind::EP_ALL_TO_ALL;
      probs.comm_bytes = 4 * R;
      ops.push_back(probs);
    }
    // The all-to-all arrives grouped by source rank; with several local experts the
    // dispatcher sorts it by expert for the grouped GEMM and unsorts the outputs before the
    // combine, each a copy of the R x h copies, the backward the inverse copy (Megatron-core
    // MoEAlltoAllTokenDispatcher "Permutation 2" / "Unpermutation 2": sort_chunks_by_idxs;
    // torchtitan ExpertParallel _permute / _unpermute), as do the chunks an expert-TP
    // all-gather brings. A flex dispatcher's permute after its exchange groups by expert.
    const bool sorted = !flex && (c.p.ep > 1 || etp > 1) && local_experts > 1;
    const auto sort = [&](const char* name) {
      ops.push_back(permute(name, c.act * R * eh, c.act * R * eh, 0, 0));
    };
    if (sorted) sort("moe_sort");
    mlp_block(ec, "expert", R, eh, static_cast<double>(m.moe.expert_ffn), m.linear_bias,
              c.act * R * eh, true, local_experts, ops);
    if (sorted) sort("moe_unsort");
    // Megatron-core weights the routed tokens by the router probabilities inside the experts'
    // fused activation (experts.py, TEGroupedMLP: weighted_bias_swiglu_impl(..., permuted_probs)),
    // which keeps the fp32 probability of each routed token; the unpermute after the combine
    // all-to-all runs without probs (token_dispatcher.py, MoEAlltoAllTokenDispatcher.
    // combine_postprocess) and keeps only its index map, not the expert outputs.
    OpCost combine = permute("moe_combine", c.act * R * eh, held, 4 * R, 2 * R * eh);
    exchange(combine);
    ops.push_back(combine);
    for (size_t i = routed; i < ops.size(); ++i) ops[i].dynamic_shape = true;
    if (latent) {
      ops.push_back(linear(c, "latent_up", local_tokens, eh, h, Parallel::REPLICATED, false,
                           c.act * local_tokens * eh, c.wbytes));
    }
    const size_t shared = ops.size();
    if (m.moe.shared_experts > 0) {
      mlp_block(c, "shared_expert", T, h,
                static_cast<double>(m.moe.shared_experts * m.shared_ffn()), m.linear_bias, seq_in,
                false, 1, ops);
    }
    for (size_t i = shared; i < ops.size(); ++i) ops[i].graph_module = GraphModule::MOE_ROUTER;
    tag_moe_recompute(c.act * local_tokens * h, first, ops);
    detail::push_post_norm(c, "mlp_post_norm", ops);
    push_residual(c, "mlp_residual", ops);
  }
}

}  // namespace

double activation_element_bytes(const TrainingPlan& plan) {
  return bytes_per_element(activation_dtype(plan.precision));
}

double tokens_per_gpu(const ModelSpec& model, const TrainingPlan& plan) {
  if (model.kind == ModelKind::MLP) return static_cast<double>(plan.mbs);
  return static_cast<double>(plan.mbs) * static_cast<double>(plan.seq) / plan.cp;
}

double layer_input_bytes(const ModelSpec& model, const TrainingPlan& plan) {
  const Ctx c(model, plan);
  const double div = model.kind == ModelKind::MLP ? 1 : c.seq_div;
  return c.act * c.T * static_cast<double>(model.hidden) / div;
}

std::vector<OpCost> embedding_ops(const ModelSpec& model, const TrainingPlan& plan) {
  std::vector<OpCost> ops;
  if (model.kind == ModelKind::MLP) return ops;
  const Ctx c(model, plan);
  const double h = static_cast<double>(model.hidden);
  // Vocabulary-parallel: each TP rank holds V/tp rows, looks up its own tokens and the
  // partial results are summed across TP. Learned positions are replicated.
  OpCost op;
  op.name = "embedding";
  op.kind = OpKind::EMBEDDING;
  op.params = static_cast<double>(model.vocab) * h / c.t +
              static_cast<double>(model.max_position_embeddings) * h;
  op.input_bytes = 4 * c.T;
  op.weight_bytes = c.act * c.T * h;
  op.output_bytes = c.act * c.T * h;
  op.saved_bytes = model.dropout ? c.T * h / c.seq_div : 0;  // the dropout mask
  op.backward_bytes = embedding_backward_bytes(
      static_cast<double>(model.vocab) / c.t + static_cast<double>(model.max_position_embeddings),
      h, c.T, c.act);
  op.kernels = 2;  // gather (+ position add); backward zero-fill + scatter-add
  if (model.scaled_embedding) {
    // Gemma multiplies the embedded tokens by sqrt(hidden) (HF GemmaModel.forward
    // `hidden_states * normalizer`; Megatron-Bridge gemma/modules.py EmbeddingScalingMixin,
    // after the embedding's sequence-parallel scatter): one more kernel each way reading and
    // writing the tokens (counted as input: output_bytes stays the result tensor).
    const double scaled = c.act * c.T * h / c.seq_div;
    op.kernels += 1;
    op.input_bytes += 2 * scaled;
    op.backward_bytes += 2 * scaled;
  }
  c.tp_reduce(op, c.act * c.T * h);
  ops.push_back(op);
  return ops;
}

namespace {

// Transformer Engine keeps an FP8 linear's input for the weight gradient as the FP8 cast made
// in forward, column-wise copy only: 1 B per element instead of the bf16 input
// (transformer_engine/pytorch/module/linear.py `_Linear.forward`: "Discard row-wise data since
// it is not needed in backward pass", `saved_inputmat = inputmat`; grouped_linear.py likewise).
// MXFP8 / blockwise scales (1/32 B per element or less) are not counted. NVFP4 keeps its FP4
// column-wise copy the same way (TE NVFP4Quantizer, same `_Linear.forward` path): 0.5 B per
// element plus its E4M3 scale per 16 elements.
void keep_fp8_linear_inputs(const Ctx& c, std::vector<OpCost>& ops) {
  if (!low_precision_linears(c.p.precision)) return;
  const double kept = c.p.precision == Precision::NVFP4
                          ? bytes_per_element(DType::FP4) + NVFP4_SCALE_BYTES_PER_ELEMENT
                          : bytes_per_element(DType::FP8);
  for (OpCost& op : ops) {
    if (op.kind == OpKind::MATMUL && op.fp8_linear) {
      // The q, k, v a projection keeps for attention stay 16-bit (attention is not FP8).
      op.saved_bytes =
          (op.saved_bytes - op.saved_output_bytes) * kept / c.act + op.saved_output_bytes;
      op.kept_when_freed *= kept / c.act;
    }
  }
}

// The linears of `ops` unquantised: they run in bf16, read bf16 weights and keep their 16-bit
// inputs (keep_fp8_linear_inputs passes them by).
void unquantised(const Ctx& c, std::vector<OpCost>& ops) {
  const double weight_scale = bytes_per_element(matmul_weight_dtype(Precision::BF16)) / c.wbytes;
  for (OpCost& op : ops) {
    if (!op.fp8_linear) continue;
    op.fp8_linear = false;
    op.weight_bytes *= weight_scale;
  }
}

// Layer `layer_index`'s ops, its linears unquantised when `in_bf16` (layer_ops: the
// first/last-layer rule; the MTP modules' copies of a layer: keep_mtp_in_bf16, as Megatron-core
// runs them under the global FP8 context, multi_token_prediction.py get_fp8_context(config)
// with no layer number).
std::vector<OpCost> build_layer_ops(const ModelSpec& model, const TrainingPlan& plan,
                                    int layer_index, bool in_bf16) {
  const Ctx c(model, plan);
  std::vector<OpCost> ops;
  if (model.kind == ModelKind::MLP) {
    const double w = static_cast<double>(model.hidden);
    OpCost fc = linear(c, "fc", c.T, w, w, Parallel::COLUMN, true, c.act * c.T * w, c.wbytes);
    if (plan.tp > 1) {
      fc.comm = CommKind::TP_ALL_GATHER;
      fc.comm_bytes = c.act * c.T * w;
    }
    ops.push_back(fc);
    ops.push_back(elementwise("act", c.act * c.T * w / c.t, c.act * c.T * w / c.t,
                              c.act * c.T * w / c.t, 8 * c.T * w / c.t));
  } else {
    // A transformer layer is attention then the MLP (or routed experts); a hybrid
    // pattern's layer is one of the blocks.
    const LayerKind kind = model.layer_kind(layer_index);
    if (has_attention_block(kind)) {
      attention_ops(c, layer_index, ops);
      for (OpCost& op : ops) op.graph_module = GraphModule::ATTN;
    }
    if (kind == LayerKind::MAMBA) {
      // Megatron's "mamba" CUDA-graph scope captures the whole Mamba layer.
      detail::mamba_ops(c, ops);
      for (OpCost& op : ops) op.graph_module = GraphModule::MAMBA;
    }
    if (has_mlp_block(kind)) mlp_ops(c, layer_index, ops);
  }
  for (OpCost& op : ops)
    if (op.attention_core) tag(op, RecomputeModule::CORE_ATTN, true, true);
  if (in_bf16) unquantised(c, ops);
  keep_fp8_linear_inputs(c, ops);
  apply_recompute(model, plan, layer_index, ops);
  return ops;
}

}  // namespace

Bf16Layers bf16_layers(const ModelSpec& model, const TrainingPlan& plan) {
  if (!low_precision_linears(plan.precision) || !plan.first_last_layers_bf16)
    return {0, model.layers};
  const int start_end = std::min(plan.num_layers_at_start_in_bf16, model.layers);
  return {start_end, std::max(model.layers - plan.num_layers_at_end_in_bf16, start_end)};
}

bool layer_in_bf16(const ModelSpec& model, const TrainingPlan& plan, int layer_index) {
  return bf16_layers(model, plan).contains(layer_index);
}

std::vector<OpCost> layer_ops(const ModelSpec& model, const TrainingPlan& plan, int layer_index) {
  return build_layer_ops(model, plan, layer_index, layer_in_bf16(model, plan, layer_index));
}

namespace {

// The final norm (transformers), the LM head (or classifier) and its cross-entropy.
void push_lm_head(const Ctx& c, bool shares_weights, std::vector<OpCost>& ops) {
  const ModelSpec& model = c.m;
  const TrainingPlan& plan = c.p;
  const double h = static_cast<double>(model.hidden), V = static_cast<double>(model.vocab);
  const bool mlp = model.kind == ModelKind::MLP;
  const double div = mlp ? 1 : c.seq_div;
  if (!mlp) push_pre_norm(c, "final_norm", ops, false);
  // The head's weights stay 16-bit (or fp32) under fp8: they are read at activation width.
  OpCost head = linear(c, mlp ? "classifier" : "lm_head", c.T, h, V, Parallel::COLUMN, mlp,
                       c.act * c.T * h / div, c.act);
  // Transformer Engine covers the layers' linears only; Megatron's output layer is a plain
  // ColumnParallelLinear, so it runs 16-bit under --fp8.
  head.fp8_linear = false;
  if (shares_weights) head.params = 0;
  ops.push_back(head);
  // Gemma 2's final-logit soft-capping runs on the head's output before the loss
  // (Megatron-Bridge gemma2_provider.py Gemma2OutputLayer; HF Gemma2ForCausalLM.forward): its
  // tanh output, as large as the logits, waits for the head's backward.
  if (!mlp && model.final_logit_softcap > 0)
    ops.push_back(softcap_op("logit_softcap", c.T * V / c.t, c.act, c.fusion));
  // Logits (16-bit) plus the fp32 copy vocab-parallel cross-entropy computes in; both live
  // for one micro-batch only (the loss backward runs right after the forward).
  OpCost loss = cross_entropy_op(c.T * V / c.t, c.T, c.act, plan.cross_entropy);
  loss.saved_bytes = c.act * c.T * V / c.t + 4 * c.T * V / c.t;
  if (plan.tp > 1) {
    loss.comm = CommKind::TP_ALL_REDUCE;
    loss.comm_bytes = 3 * 4 * c.T;  // max, sum of exponentials, target logit (fp32)
  }
  ops.push_back(loss);
}

// DeepSeek-V3's multi-token-prediction modules (report Sec 2.2, Fig. 3; Megatron-core
// transformer/multi_token_prediction.py MultiTokenPredictionLayer), run on the last pipeline
// stage after the main model: per depth, the embedding of the tokens shifted by one (the
// shared embedding), RMSNorm of it and of the previous hidden state (enorm, hnorm), the
// 2h -> h projection of their concatenation (eh_proj, a column-parallel TE linear), one
// transformer layer built like the model's last (MoE) layer, and the shared output head with
// its cross-entropy. With pp > 1 the last stage holds its own copy of the embedding (Megatron
// GPTModel builds `embedding` when mtp_process); the head is the main model's.
void push_mtp(const Ctx& c, std::vector<OpCost>& ops) {
  const ModelSpec& m = c.m;
  if (m.mtp_layers <= 0) return;
  const double h = static_cast<double>(m.hidden);
  // One depth, built once: every depth runs the same ops.
  std::vector<OpCost> mtp = embedding_ops(m, c.p);
  if (c.p.pp == 1) mtp.front().params = 0;  // the first stage's table, shared
  mtp.push_back(norm(c, "enorm", c.T / c.seq_div, h));
  mtp.push_back(norm(c, "hnorm", c.T / c.seq_div, h));
  OpCost eh = linear(c, "eh_proj", c.T, 2 * h, h, Parallel::COLUMN, false,
                     2 * c.act * c.T * h / c.seq_div, c.wbytes);
  if (c.p.sp && c.p.tp > 1) {  // the concatenation is gathered before the column linear
    eh.comm = CommKind::TP_ALL_GATHER;
    eh.comm_bytes = 2 * c.act * c.T * h;
  }
  mtp.push_back(eh);
  // The depth's blocks: a hybrid's MTP pattern (each block built like the model's first
  // layer of that type), else one layer like the model's last.
  std::vector<int> blocks;
  for (const char b : m.mtp_pattern) blocks.push_back(static_cast<int>(m.pattern.find(b)));
  if (blocks.empty()) blocks.push_back(m.layers - 1);
  for (const int l : blocks)
    for (OpCost& op : build_layer_ops(m, c.p, l, c.p.keep_mtp_in_bf16))
      mtp.push_back(std::move(op));
  push_lm_head(c, true, mtp);
  // Megatron-Bridge's keep_mtp_spec_in_bf16 (Nemotron 3 Super's recipe sets it): eh_proj too.
  if (c.p.keep_mtp_in_bf16) unquantised(c, mtp);
  for (OpCost& op : mtp) op.name = "mtp_" + op.name;
  ops.insert(ops.end(), mtp.begin(), mtp.end());
  // The later depths share the embedding table; a repeated module's run the first depth's
  // weights too (its parameters, and their gradients, counted once).
  mtp.front().params = 0;
  if (m.mtp_repeated_layer)
    for (OpCost& op : mtp) op.params = 0;
  for (int d = 1; d < m.mtp_layers; ++d) ops.insert(ops.end(), mtp.begin(), mtp.end());
}

}  // namespace

std::vector<OpCost> head_ops(const ModelSpec& model, const TrainingPlan& plan) {
  const Ctx c(model, plan);
  std::vector<OpCost> ops;
  const bool mlp = model.kind == ModelKind::MLP;
  push_lm_head(c, !mlp && model.tied_embeddings && plan.pp == 1, ops);  // shares the embedding
  if (!mlp && plan.mtp) push_mtp(c, ops);
  return ops;
}

}  // namespace loom::models
