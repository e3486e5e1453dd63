#pragma once
// Numeric formats of tensors and the one table of their storage size. Every byte count
// derived from a precision (weights, gradients, activations, optimizer copies) goes through
// bytes_per_element so the same format is never sized twice. TF32 is a tensor-core compute
// mode over fp32 storage, so it occupies 4 bytes. FP4 (E2M1) packs two elements per byte; its
// block scales belong to the recipe that makes it (NVFP4: one E4M3 scale per 16 elements).
#include <string_view>

namespace loom {

/// A tensor element format.
enum class DType { FP32, TF32, BF16, FP16, FP8, FP4 };  // FP4 last: topo::DTYPE_COUNT

/// Bytes one element occupies in memory (FP32/TF32 4, BF16/FP16 2, FP8 1, FP4 0.5).
constexpr double bytes_per_element(DType dtype) {
  switch (dtype) {
    case DType::FP32:
    case DType::TF32:
      return 4.0;
    case DType::BF16:
    case DType::FP16:
      return 2.0;
    case DType::FP8:
      return 1.0;
    case DType::FP4:
      return 0.5;
  }
  return 4.0;
}

/// FP8 scaling recipes, named as Megatron-LM's --fp8-recipe names them (Transformer Engine's
/// transformer_engine/common/recipe classes in brackets).
enum class Fp8Recipe {
  DELAYED,     ///< per-tensor scale from an amax history [DelayedScaling]
  TENSORWISE,  ///< per-tensor scale from the tensor's own amax [Float8CurrentScaling]
  BLOCKWISE,   ///< 1x128 activation / 128x128 weight block scales [Float8BlockScaling]
  MXFP8,       ///< 1x32 blocks, E8M0 scales applied by Blackwell tensor cores [MXFP8BlockScaling]
};

/// Lower-case name, e.g. "bf16".
constexpr std::string_view to_string(DType dtype) {
  switch (dtype) {
    case DType::FP32:
      return "fp32";
    case DType::TF32:
      return "tf32";
    case DType::BF16:
      return "bf16";
    case DType::FP16:
      return "fp16";
    case DType::FP8:
      return "fp8";
    case DType::FP4:
      return "fp4";
  }
  return "fp32";
}

/// Block scales in bytes per element: MXFP8's E8M0 byte per 32 elements (OCP Microscaling
/// Formats v1.0), NVFP4's E4M3 byte per 16 (NVIDIA, "Pretraining Large Language Models with
/// NVFP4", arXiv:2509.25149, Sec. 2).
inline constexpr double MXFP8_SCALE_BYTES_PER_ELEMENT = 1.0 / 32;
inline constexpr double NVFP4_SCALE_BYTES_PER_ELEMENT = 1.0 / 16;

/// Megatron's name of `recipe`, e.g. "tensorwise".
constexpr std::string_view to_string(Fp8Recipe recipe) {
  switch (recipe) {
    case Fp8Recipe::DELAYED:
      return "delayed";
    case Fp8Recipe::TENSORWISE:
      return "tensorwise";
    case Fp8Recipe::BLOCKWISE:
      return "blockwise";
    case Fp8Recipe::MXFP8:
      return "mxfp8";
  }
  return "delayed";
}

}  // namespace loom
