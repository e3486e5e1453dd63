#pragma once
// The memory-bound (non-GEMM) kernels of a transformer layer, embedding and loss, and what
// kernel fusion does to them: how many kernels each op launches and how many bytes those
// kernels move under each plan.fusion level (PyTorch eager, Megatron / Transformer Engine
// fused kernels, torch.compile), and the cross-entropy kernels under plan.cross_entropy.
// flops.cpp builds the op list; this file owns the per-framework fusion rules and their
// sources (docs/defaults.md lists them).
#include <optional>
#include <string>

#include "models/flops.hpp"
#include "models/training_plan.hpp"

namespace loom::models {

/// A memory-bound op: `in_bytes` read and `out_bytes` written by its forward, `saved` kept
/// for backward, `flops` reported (not counted in MFU); one kernel, backward by the default
/// factor.
OpCost elementwise(std::string name, double in_bytes, double out_bytes, double saved, double flops);

/// Applies `fusion` to a normalisation op (its forward bytes are one fused kernel's): PyTorch
/// eager RMSNorm runs as six ATen kernels on fp32 upcasts; LayerNorm is one ATen kernel at
/// every level.
void apply_norm_fusion(OpCost& op, NormKind norm, Fusion fusion);

/// Applies `fusion` to an MLP activation op (forward bytes of one fused kernel): eager runs
/// SwiGLU as silu + mul, GeGLU as gelu + mul (under Megatron too), GeLU with a bias as bias
/// add + gelu.
void apply_activation_fusion(OpCost& op, MlpKind mlp, bool bias, Fusion fusion);

/// The clamp of a gated MLP's two halves before its activation (ModelSpec::activation_clamp),
/// each half `half_bytes` (one GPU's share): under Megatron two clamps and the cat that
/// rejoins the halves, eager two clamps; none under torch.compile, which fuses the clamp into
/// the activation kernel (std::nullopt). Keeps its input (the up projection's output) for the
/// clamps' backward.
std::optional<OpCost> activation_clamp_op(std::string name, double half_bytes, Fusion fusion);

/// Soft-capping, cap * tanh(x / cap), over `elements` activation elements of `act` bytes (the
/// unfused attention scores, the LM head's logits: Gemma 2): three kernels (divide, tanh,
/// multiply) unless torch.compile fuses them into one; keeps the tanh output for backward.
OpCost softcap_op(std::string name, double elements, double act, Fusion fusion);

/// Applies `fusion` to a non-flash attention softmax (scale, mask, softmax).
void apply_softmax_fusion(OpCost& op, Fusion fusion);

/// Rotary position embedding of queries and keys: `qk_bytes` the bytes of the rotated q and k
/// together (one GPU's share); reads and writes them, the backward rotates the gradients back.
OpCost rope_op(double qk_bytes, Fusion fusion);

/// The residual add after an attention or MLP block over `elements` activation elements of
/// `act` bytes each, with dropout (a 1-byte mask) before it when `dropout`. Megatron fuses
/// bias + dropout + add into one kernel; eager runs dropout and add apart.
OpCost residual_op(std::string name, double elements, double act, bool dropout, Fusion fusion);

/// The MoE router's softmax and top-k over `tokens` x `experts` fp32 logits, writing `top_k`
/// probabilities and indices per token.
OpCost router_topk_op(double tokens, double experts, double top_k, Fusion fusion);
/// Megatron-core's all-to-all dispatcher preprocessing of one MoE layer's forward: the token
/// counts per expert and the all-to-all splits from the routing map (`tokens` x `experts`
/// booleans), 6 small kernels when the experts are split over ranks (`split`: ep or expert
/// TP), else 1; no backward.
OpCost dispatch_preprocess_op(double tokens, double experts, bool split);

/// Cross-entropy over `logits` vocabulary-parallel logit elements of `act` bytes for `tokens`
/// tokens: the fp32 softmax, loss and gradient kernels of `kind`.
OpCost cross_entropy_op(double logits, double tokens, double act, CrossEntropy kind);

/// Bytes of the backward of a vocabulary-parallel embedding lookup: the dense weight gradient
/// of `rows` x `width` zero-filled, then `tokens` x `width` output gradients scatter-added.
double embedding_backward_bytes(double rows, double width, double tokens, double act);

/// Bytes one gradient-accumulation add moves per parameter per micro-batch: read the main
/// gradient, read the micro-batch gradient (16-bit), write the main gradient.
double grad_accumulation_bytes_per_param(GradDtype grad_dtype);

/// Whether a MATMUL op's weight gradient is accumulated by its GEMM (no separate add kernel):
/// Megatron's gradient-accumulation fusion.
bool wgrad_accumulation_fused(Fusion fusion);

}  // namespace loom::models
