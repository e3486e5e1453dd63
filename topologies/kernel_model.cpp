#include "topologies/kernel_model.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "common/error.hpp"

namespace loom::topo {

PassSeconds KernelTimeModel::pass_seconds(const KernelOp& op, DType math) const {
  PassSeconds s;
  s.forward = seconds(op, KernelPass::FORWARD, math);
  s.backward_input = seconds(op, KernelPass::BACKWARD_INPUT, math);
  s.backward_weight = seconds(op, KernelPass::BACKWARD_WEIGHT, math);
  return s;
}

DType tensor_core_dtype(DType math) {
  return math == DType::FP32 ? DType::TF32 : math;
}

DatasheetKernelModel::DatasheetKernelModel(GpuSpec gpu, GpuEfficiency efficiency)
    : gpu_(std::move(gpu)), efficiency_(efficiency) {
  check_invariant(gpu_.bf16_flops > 0 && gpu_.hbm_bandwidth_Bps > 0,
                  "GPU spec without bf16 peak or HBM bandwidth");
  check_invariant(gpu_.sm_count > 0, "GPU spec without an SM count");
}

double DatasheetKernelModel::peak_flops(DType math) const {
  // A GPU without a dtype's tensor cores runs it on the next wider ones it has.
  switch (tensor_core_dtype(math)) {
    case DType::FP8:
      return gpu_.fp8_flops > 0 ? gpu_.fp8_flops : gpu_.bf16_flops;
    case DType::FP16:
      return gpu_.fp16_flops > 0 ? gpu_.fp16_flops : gpu_.bf16_flops;
    case DType::BF16:
      return gpu_.bf16_flops;
    case DType::TF32:
      return gpu_.tf32_flops > 0 ? gpu_.tf32_flops : gpu_.fp32_flops;
    case DType::FP32:
      break;  // tensor_core_dtype never returns FP32
  }
  return gpu_.bf16_flops;
}

double DatasheetKernelModel::matmul_efficiency(std::int64_t m, std::int64_t n, std::int64_t k,
                                               std::int64_t batch) const {
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0) return 1.0;
  const double h = efficiency_.matmul_half_dim;
  auto sat = [h](double x) { return x / (x + h); };
  // Shape: each dimension saturates on its own; the normalisation keeps a large square
  // GEMM (8192) at exactly matmul_peak_fraction.
  const double big = sat(8192.0);
  const double shape = (sat(double(m)) / big) * (sat(double(n)) / big) * (sat(double(k)) / big);
  // Wave quantisation: output tiles are dealt to SMs in waves; a partial last wave idles SMs.
  const double tile = efficiency_.matmul_tile;
  const double tiles =
      std::ceil(double(m) / tile) * std::ceil(double(n) / tile) * static_cast<double>(batch);
  const double sms = gpu_.sm_count;
  // Fewer tiles than SMs: libraries split K across CTAs (split-K / stream-K) to fill the GPU,
  // so only the shape saturation applies.
  const double waves = std::ceil(tiles / sms);
  const double wave = tiles < sms ? 1.0 : tiles / (waves * sms);
  return std::clamp(efficiency_.matmul_peak_fraction * std::min(shape, 1.0) * wave, 1e-3, 1.0);
}

double DatasheetKernelModel::gemm_time_s(double flops, std::int64_t m, std::int64_t n,
                                         std::int64_t k, std::int64_t batch, DType math) const {
  if (flops <= 0) return 0;
  return flops / (peak_flops(math) * matmul_efficiency(m, n, k, batch)) +
         efficiency_.kernel_overhead_s;
}

double DatasheetKernelModel::memory_time_s(double bytes) const {
  if (bytes <= 0) return 0;
  return bytes / (gpu_.hbm_bandwidth_Bps * efficiency_.memory_bandwidth_fraction) +
         efficiency_.kernel_overhead_s;
}

double DatasheetKernelModel::attention_time_s(double flops, DType math) const {
  if (flops <= 0) return 0;
  return flops / (peak_flops(math) * efficiency_.attention_fraction) +
         efficiency_.kernel_overhead_s;
}

double DatasheetKernelModel::attention_seconds(const KernelOp& op, KernelPass pass,
                                               DType math) const {
  // Attention has no weights: its backward (dQ, dK, dV) is one kernel, timed as the input
  // gradient with the FLOPs of both backward halves.
  if (pass == KernelPass::BACKWARD_WEIGHT) return 0;
  const double backward_flops = op.backward_input_flops + op.backward_weight_flops;
  if (!op.fused) {
    // Unfused: scores and context are batched GEMMs; the backward runs at the transposed
    // (dA) shape, as one GEMM of the whole backward's FLOPs.
    if (pass == KernelPass::FORWARD)
      return gemm_time_s(op.forward_flops, op.m, op.n, op.k, op.batch, math);
    return gemm_time_s(backward_flops, op.m, op.k, op.n, op.batch, math);
  }
  // Fused attention skips the masked part of a causal square.
  const double scale = op.causal ? efficiency_.attention_causal_fraction : 1.0;
  if (pass == KernelPass::FORWARD) return attention_time_s(op.forward_flops * scale, math);
  // The overhead is divided too: the backward is one slower kernel (kept for bit-identical
  // step times with the model this replaced).
  return attention_time_s(backward_flops * scale, math) / efficiency_.attention_backward_ratio;
}

double DatasheetKernelModel::seconds(const KernelOp& op, KernelPass pass, DType math) const {
  switch (op.kind) {
    case KernelKind::GEMM:
      // Forward C = A·B ([m x k]·[k x n]); dA = dC·Bᵀ is [m x n]·[n x k]; dB = Aᵀ·dC is
      // [k x m]·[m x n]: each timed at the efficiency of its own shape.
      switch (pass) {
        case KernelPass::FORWARD:
          return gemm_time_s(op.forward_flops, op.m, op.n, op.k, op.batch, math);
        case KernelPass::BACKWARD_INPUT:
          return gemm_time_s(op.backward_input_flops, op.m, op.k, op.n, op.batch, math);
        case KernelPass::BACKWARD_WEIGHT:
          return gemm_time_s(op.backward_weight_flops, op.k, op.n, op.m, op.batch, math);
      }
      break;
    case KernelKind::ATTENTION:
      return attention_seconds(op, pass, math);
    case KernelKind::MEMORY_BOUND:
      // The backward (input and weight gradients of a norm or elementwise op) is one kernel
      // moving about twice the forward bytes.
      if (pass == KernelPass::FORWARD) return memory_time_s(op.bytes);
      if (pass == KernelPass::BACKWARD_INPUT)
        return memory_time_s(efficiency_.memory_backward_factor * op.bytes);
      return 0;
    case KernelKind::OPTIMIZER:
      return pass == KernelPass::FORWARD ? memory_time_s(op.bytes) : 0.0;
  }
  return 0;
}

}  // namespace loom::topo
