#pragma once
// Per-op cost of one micro-batch on one GPU: the operator list of the embedding, each
// transformer (or MLP) layer and the LM head, with forward, backward (input and weight
// gradients separately) and recompute FLOPs, the bytes each op moves, its matmul shape,
// the activation bytes it keeps for backward, the parameters it holds and the collective
// that follows it. Everything is one GPU's share: tokens are b x s / cp, column- and
// row-parallel matmuls are split by tp, sequence-parallel regions by tp when plan.sp,
// experts by ep. The strategy planner lowers these ops to simulator tasks; the memory
// model sums their saved activations and parameters.
//
// Counting convention (Narayanan et al. 2021, Eq. 3): a matmul [m x k] x [k x n] costs
// 2mnk FLOPs; the attention score and attention x V matmuls count the full s x s square
// (no causal-mask halving); the backward pass costs twice the forward (input gradient =
// forward, weight gradient = forward; weight-less attention matmuls have two input
// gradients); norms, softmax, activations and the loss are memory-bound ops whose small
// FLOP counts are reported but left out of the totals unless FlopConvention asks.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/model_spec.hpp"
#include "models/parallel_dim.hpp"
#include "models/training_plan.hpp"

namespace loom::models {

/// What kind of work an op is.
enum class OpKind {
  MATMUL,       ///< a matmul with weights (projections, MLP, experts, router, LM head)
  ATTENTION,    ///< a weight-less batched matmul (attention scores, attention x V)
  ELEMENTWISE,  ///< memory-bound: norms, softmax, activations, dropout, token permutation
  EMBEDDING,    ///< a table lookup (memory-bound)
  LOSS,         ///< cross-entropy over the vocabulary (memory-bound)
};

/// The collective that follows an op in the forward pass (its mirror runs in backward).
enum class CommKind {
  NONE,
  TP_ALL_REDUCE,      ///< row-parallel output without sequence parallelism
  TP_ALL_GATHER,      ///< gathers sequence-parallel activations before a column-parallel op
  TP_REDUCE_SCATTER,  ///< row-parallel output with sequence parallelism
  EP_ALL_TO_ALL,      ///< MoE token dispatch or combine
  /// MoE dispatch or combine by a flex dispatcher (DeepEP, HybridEP): comm_bytes is the
  /// tokens' bytes once; a token goes once to each GPU and node its experts are on
  /// (OpCost::routing, models/moe_routing.hpp).
  EP_TOKEN_EXCHANGE,
  CP_KV_EXCHANGE,  ///< context parallelism: keys and values passed around the CP ring
};

/// Matmul shape: `batch` independent products C[m x n] = A[m x k] B[k x n].
struct MatmulShape {
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::int64_t batch = 1;
};

/// The sequence shape of an attention matmul, which sets a fused kernel's efficiency (the
/// kernel model's attention_shape_factor): the query tokens of one sequence on this GPU,
/// the key/value tokens they attend over, the head dimension of this matmul and the
/// context-parallel ring size (cp: the kernel runs as cp chunks of ring attention).
struct AttentionShape {
  std::int64_t seq_q = 0;     ///< query tokens per sequence on this GPU (s / cp)
  std::int64_t seq_kv = 0;    ///< key/value tokens each query sequence sees (s)
  std::int64_t head_dim = 0;  ///< head dimension (d_qk for scores, d_v for attention x V)
  int cp = 1;                 ///< context-parallel ring size
  std::int64_t window = 0;    ///< sliding window in keys (0: full causal attention)
};

/// One op of one micro-batch on one GPU. FLOPs in floating-point operations, bytes in bytes.
struct OpCost {
  std::string name;  ///< e.g. "qkv_proj", "attn_scores", "mlp_down", "lm_head"
  OpKind kind = OpKind::ELEMENTWISE;
  MatmulShape shape;            ///< meaningful for MATMUL and ATTENTION
  AttentionShape attention;     ///< meaningful for ATTENTION
  double fwd_flops = 0;         ///< forward FLOPs
  double bwd_input_flops = 0;   ///< backward FLOPs for the input (activation) gradient
  double bwd_weight_flops = 0;  ///< backward FLOPs for the weight gradient
  double recompute_flops = 0;   ///< extra forward FLOPs under plan.recompute
  double weight_bytes = 0;      ///< weights read in forward (compute dtype), bytes
  double input_bytes = 0;       ///< activations read in forward, bytes
  double output_bytes = 0;      ///< activations written in forward, bytes (backward moves
                                ///< about twice the forward bytes)
  double saved_bytes = 0;       ///< activations kept for backward without recompute, bytes
  /// Of saved_bytes, the op's own 16-bit outputs kept for later ops (a Q/K/V projection's
  /// q, k, v, which attention reads in backward); the rest is its input.
  double saved_output_bytes = 0;
  /// Memory-bound ops: kernels each pass launches (an unfused chain launches several).
  int kernels = 1;
  /// Memory-bound ops: bytes the backward moves; negative: the kernel model's default
  /// multiple of the forward bytes.
  double backward_bytes = -1;
  /// Output bytes of each separate matmul a fused MATMUL op stands for, forward order (qkv:
  /// q, k, v; gated MLP up: gate, up; otherwise the one output): torchtitan's op-level
  /// selective recompute counts them one by one.
  std::array<double, 3> output_parts{};
  double params = 0;            ///< parameters this op holds on this GPU
  bool expert = false;          ///< params are routed-expert weights (sharded over EP)
  bool attention_core = false;  ///< recomputed by selective recompute
  /// Megatron recompute modules (module_bit set) whose recompute re-runs this op's forward.
  RecomputeModules rerun_by = 0;
  /// Modules whose recompute frees this op's saved activations down to `kept_when_freed`.
  RecomputeModules freed_by = 0;
  /// Bytes this op keeps when a module in `freed_by` is recomputed (the checkpoint input).
  double kept_when_freed = 0;
  /// A transformer-layer linear (projections, MLP, experts) that FP8 recipes run in FP8:
  /// Transformer Engine's Linear / LayerNormLinear / LayerNormMLP / GroupedLinear. The LM
  /// head, the router and the attention core stay 16-bit.
  bool fp8_linear = false;
  bool causal = false;  ///< half the work is masked (kernels may skip it)
  /// ATTENTION (fused): the kernel soft-caps the scores (ModelSpec::attn_logit_softcap), which
  /// cuDNN's fused attention cannot and FlashAttention-2 can (flash-attn >= 2.6 `softcap`):
  /// Transformer Engine then runs FlashAttention-2 (strategies/step/pass_cost.cpp).
  bool softcap = false;
  /// The partial-CUDA-graph scope that captures this op (TrainingPlan::cuda_graph_scope);
  /// unset: only a whole-layer graph does.
  std::optional<GraphModule> graph_module;
  /// Shapes that change from step to step (a dropless MoE layer's dispatch, routed experts
  /// and combine: tokens per expert): no CUDA graph captures the op.
  bool dynamic_shape = false;
  CommKind comm = CommKind::NONE;  ///< collective after this op in forward
  double comm_bytes = 0;           ///< size of that collective's tensor on this GPU, bytes
  /// CP_KV_EXCHANGE: the local queries' bytes, which an all-to-all CP (--cp-comm-type a2a)
  /// exchanges with the keys and values (and as many output bytes back).
  double cp_query_bytes = 0;
  MoeSpec routing;  ///< EP_TOKEN_EXCHANGE: the experts the tokens are routed to

  bool is_matmul() const { return kind == OpKind::MATMUL || kind == OpKind::ATTENTION; }
  /// Forward + both backward FLOPs (no recompute).
  double train_flops() const { return fwd_flops + bwd_input_flops + bwd_weight_flops; }
};

/// Bytes of one activation element under the plan's precision (2, or 4 for fp32).
double activation_element_bytes(const TrainingPlan& plan);
/// Tokens one GPU processes per micro-batch: mbs x seq / cp (mbs for MLP models).
double tokens_per_gpu(const ModelSpec& model, const TrainingPlan& plan);

/// The input embedding ops (lookup, position add, dropout) for one micro-batch; empty for
/// MLP models.
std::vector<OpCost> embedding_ops(const ModelSpec& model, const TrainingPlan& plan);
/// The ops of layer `layer_index` (0-based) for one micro-batch, forward order.
std::vector<OpCost> layer_ops(const ModelSpec& model, const TrainingPlan& plan, int layer_index);
/// The layers that run their linears in bf16 though the plan's precision is fp8 or nvfp4:
/// under plan.first_last_layers_bf16 the first plan.num_layers_at_start_in_bf16 and the last
/// plan.num_layers_at_end_in_bf16 of the model (global layer numbers, as Megatron-core's
/// is_first_last_bf16_layer; a hybrid pattern's every block counts), as two ranges
/// [0, start_end) and [end_begin, layers) with start_end <= end_begin; none when the rule is
/// off. layer_ops builds such a layer's linears unquantised.
struct Bf16Layers {
  int start_end = 0;
  int end_begin = 0;
  bool contains(int layer_index) const {
    return layer_index < start_end || layer_index >= end_begin;
  }
};
Bf16Layers bf16_layers(const ModelSpec& model, const TrainingPlan& plan);
/// Whether layer `layer_index` is one of bf16_layers.
bool layer_in_bf16(const ModelSpec& model, const TrainingPlan& plan, int layer_index);
/// The final norm, LM head (or classifier) and cross-entropy for one micro-batch.
/// With tied embeddings the head holds parameters only when pp > 1 (a copy on the last
/// stage, as Megatron keeps).
std::vector<OpCost> head_ops(const ModelSpec& model, const TrainingPlan& plan);

/// Sets the extra forward FLOPs (recompute_flops) of layer `layer_index`'s ops when it is
/// recomputed: full re-runs every op; Megatron selective the ops of plan.recompute_modules;
/// torchtitan's op policy the even-numbered matmuls and the memory-bound ops.
void apply_recompute(const ModelSpec& model, const TrainingPlan& plan, int layer_index,
                     std::vector<OpCost>& ops);
/// Whether layer `layer_index` is recomputed: plan.recompute is not none, (layer_index + 1)
/// is a multiple of plan.recompute_every (torchtitan's every-k-th layer) and, under full
/// recompute with the block method, the layer is among the first plan.recompute_num_layers
/// of its model chunk (virtual_stage_layers).
bool layer_recomputed(const ModelSpec& model, const TrainingPlan& plan, int layer_index);
/// Activation bytes torchtitan's op-level selective checkpoint keeps for a layer with op list
/// `ops`: the block input, the output of every other matmul (1st, 3rd, ... in forward order,
/// counted per layer) and the attention output with its log-sum-exp.
double op_selective_saved_bytes(const ModelSpec& model, const TrainingPlan& plan,
                                const std::vector<OpCost>& ops);

/// The share of each op's forward that selective recompute re-runs in backward, for a layer
/// op list in forward order: 1 for a module of plan.recompute_modules in op.rerun_by
/// (Megatron); under torchtitan's op policy (torch.utils.checkpoint with _save_list: mm and
/// SDPA outputs saved "except every second mm") the even-numbered matmuls' share of each
/// matmul op, 0 for the attention core (SDPA's output saved) and 1 for every other
/// memory-bound op (not saved).
/// All 0 without selective recompute. The FLOPs are apply_recompute's.
std::vector<double> selective_rerun_fractions(const TrainingPlan& plan,
                                              const std::vector<OpCost>& ops);
/// Activation bytes `op` keeps for backward under Megatron's selective recompute of
/// plan.recompute_modules: op.kept_when_freed when one of its freeing modules is chosen.
double selective_saved_bytes(const TrainingPlan& plan, const OpCost& op);

/// Activation bytes a layer keeps when fully recomputed: its input (divided by tp with SP).
double layer_input_bytes(const ModelSpec& model, const TrainingPlan& plan);

/// How totals count FLOPs; the default is Narayanan et al.'s (matmuls only, full square).
struct FlopConvention {
  bool include_memory_bound = false;  ///< add the FLOPs of norms, softmax, activations, loss
  bool causal_halving = false;        ///< halve attention matmuls (causal mask)
};

/// FLOPs of one optimizer step over the global batch and all GPUs.
struct StepFlops {
  double forward = 0;
  double backward = 0;   ///< input + weight gradients
  double recompute = 0;  ///< extra forward under plan.recompute
  /// Model FLOPs: forward + backward.
  double model() const { return forward + backward; }
  /// Hardware FLOPs: model FLOPs + recompute.
  double hardware() const { return forward + backward + recompute; }
};

/// FLOPs of one step (global batch x seq tokens), summed over every op of every layer.
StepFlops step_flops(const ModelSpec& model, const TrainingPlan& plan,
                     FlopConvention convention = {});
/// Model FLOPs per step (no recompute): what MFU divides by.
double model_flops_per_step(const ModelSpec& model, const TrainingPlan& plan,
                            FlopConvention convention = {});
/// Hardware FLOPs per step (with recompute): what HFU divides by.
double hardware_flops_per_step(const ModelSpec& model, const TrainingPlan& plan,
                               FlopConvention convention = {});

/// Names as output spells them ("matmul", "tp_all_reduce", ...).
std::string to_string(OpKind value);
std::string to_string(CommKind value);
/// The parallel dimension whose group runs the collective `value` (TP, CP or EP); throws
/// InternalError for NONE.
Dim comm_dim(CommKind value);

}  // namespace loom::models
