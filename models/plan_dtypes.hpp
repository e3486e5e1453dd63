#pragma once
// Which element format each kind of tensor of a plan is stored or read in. Byte counts come
// from common/dtype.hpp's one table; this header only says which format applies where, so
// flops.cpp (bytes moved), memory.cpp (bytes held) and the step simulator (bytes sent)
// agree. Transformer Engine's fp8 recipe with fp8_model_params off (its default) is assumed:
// parameters and activations stay bf16, layer GEMMs read a cached fp8 cast of each weight.
// NVFP4 (TE NVFP4BlockScaling; Megatron-Bridge bf16_with_nvfp4_mixed: fp4 "e2m1", no fp4
// parameters) is the same with FP4 casts.
#include "common/dtype.hpp"
#include "models/training_plan.hpp"

namespace loom::models {

/// Format of the parameters kept between steps (the working copy that data parallelism
/// gathers): fp32, fp16, or bf16 for bf16, fp8 and nvfp4.
constexpr DType parameter_dtype(Precision p) {
  switch (p) {
    case Precision::FP32:
      return DType::FP32;
    case Precision::FP16:
      return DType::FP16;
    case Precision::BF16:
    case Precision::FP8:
    case Precision::NVFP4:
      return DType::BF16;
  }
  return DType::BF16;
}

/// Whether layer GEMMs (Transformer Engine linears) run in a format narrower than 16 bits.
constexpr bool low_precision_linears(Precision p) {
  return p == Precision::FP8 || p == Precision::NVFP4;
}

/// Format in which layer GEMMs read their weights: the cached fp8 / fp4 cast under fp8 /
/// nvfp4, else the working copy.
constexpr DType matmul_weight_dtype(Precision p) {
  return p == Precision::FP8 ? DType::FP8 : p == Precision::NVFP4 ? DType::FP4 : parameter_dtype(p);
}

/// Format of activations between ops (fp8 GEMMs still take and return bf16 tensors).
constexpr DType activation_dtype(Precision p) {
  return parameter_dtype(p);
}

/// Format in which matmuls compute: fp32 plans run on TF32 tensor cores (the PyTorch and
/// Megatron default on A100 and later), the others in their own format.
constexpr DType compute_dtype(Precision p) {
  switch (p) {
    case Precision::FP32:
      return DType::TF32;
    case Precision::FP16:
      return DType::FP16;
    case Precision::FP8:
      return DType::FP8;
    case Precision::NVFP4:
      return DType::FP4;
    case Precision::BF16:
      return DType::BF16;
  }
  return DType::BF16;
}

/// Format gradients are accumulated and reduced in: fp32 under fp32 precision, else the
/// plan's grad dtype (Megatron main-grad, fp32 by default).
constexpr DType gradient_dtype(Precision p, GradDtype g) {
  if (p == Precision::FP32) return DType::FP32;
  return g == GradDtype::FP32 ? DType::FP32 : DType::BF16;
}

/// NVFP4's block scales (common/dtype.hpp; TE NVFP4BlockScaling), in bytes per element.
using loom::NVFP4_SCALE_BYTES_PER_ELEMENT;

/// Format of the master weights and the optimizer's moments under mixed precision.
inline constexpr DType OPTIMIZER_DTYPE = DType::FP32;

}  // namespace loom::models
