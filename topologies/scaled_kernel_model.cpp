#include "topologies/scaled_kernel_model.hpp"

#include <cmath>

#include "common/error.hpp"

namespace loom::topo {

ScaledKernelModel::ScaledKernelModel(std::shared_ptr<const KernelTimeModel> inner,
                                     KernelScales scales)
    : inner_(std::move(inner)), scales_(scales) {
  check_invariant(inner_ != nullptr, "ScaledKernelModel needs a model to scale");
  bool positive = scales_.memory_bound > 0 && std::isfinite(scales_.memory_bound);
  for (double s : scales_.compute) positive = positive && s > 0 && std::isfinite(s);
  check_invariant(positive, "kernel scales must be finite and > 0");
}

double ScaledKernelModel::seconds(const KernelOp& op, KernelPass pass, DType math) const {
  const double t = inner_->seconds(op, pass, math);
  switch (op.kind) {
    case KernelKind::GEMM:
    case KernelKind::ATTENTION:
      return t / scales_.compute[static_cast<size_t>(dtype_index(tensor_core_dtype(math)))];
    case KernelKind::MEMORY_BOUND:
    case KernelKind::OPTIMIZER:
    case KernelKind::FP8_CAST:
      return t * scales_.memory_bound;
  }
  return t;
}

}  // namespace loom::topo
