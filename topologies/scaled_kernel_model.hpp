#pragma once
// A kernel-time model scaled by a few fitted physical factors (`loom calibrate fit`): matmul
// work (GEMMs and attention) runs at an efficiency scale per tensor-core dtype, memory-bound
// work (elementwise, normalisation, FP8 casts, the optimizer) at a time scale. It wraps any
// KernelTimeModel, so the factors apply on top of the datasheet model or a measured one.
#include <array>
#include <memory>

#include "topologies/kernel_model.hpp"

namespace loom::topo {

/// Number of DType values (the size of a per-dtype array): FP4 is the last.
inline constexpr int DTYPE_COUNT = static_cast<int>(DType::FP4) + 1;
/// The index of `dtype` in a per-dtype array.
constexpr int dtype_index(DType dtype) {
  return static_cast<int>(dtype);
}
/// Fitted scales; 1 leaves the wrapped model as it is.
struct KernelScales {
  /// Matmul efficiency relative to the model, per tensor-core dtype (tensor_core_dtype of
  /// the math dtype): a GEMM or attention kernel takes the model's time / scale. > 0.
  std::array<double, DTYPE_COUNT> compute{1, 1, 1, 1, 1, 1};
  /// Memory-bound, FP8-cast and optimizer kernels take the model's time x this. > 0.
  double memory_bound = 1;
};

/// `inner` with `scales` applied (see KernelScales); peak_flops is the inner model's, so MFU
/// keeps the datasheet denominator.
class ScaledKernelModel final : public KernelTimeModel {
 public:
  /// Throws InternalError when `inner` is null or a scale is not > 0.
  ScaledKernelModel(std::shared_ptr<const KernelTimeModel> inner, KernelScales scales);
  double seconds(const KernelOp& op, KernelPass pass, DType math) const override;
  double peak_flops(DType math) const override { return inner_->peak_flops(math); }
  DType peak_dtype(DType math) const override { return inner_->peak_dtype(math); }
  Fp8Recipe default_fp8_recipe() const override { return inner_->default_fp8_recipe(); }
  const KernelScales& scales() const { return scales_; }

 private:
  std::shared_ptr<const KernelTimeModel> inner_;
  KernelScales scales_;
};

}  // namespace loom::topo
