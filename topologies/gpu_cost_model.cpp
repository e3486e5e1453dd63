#include "topologies/gpu_cost_model.hpp"

#include <algorithm>
#include <cmath>

#include "common/error.hpp"

namespace loom::topo {

int default_sm_count(const std::string& name) {
  // Whitepapers: A100 108 SMs; H100 SXM5 132, PCIe 114; H200 132; B200 148 (per GPU of the
  // dual-die package); L40S 142; RTX 4090 128; MI300X 304 CUs.
  if (name.rfind("a100", 0) == 0) return 108;
  if (name == "h100-pcie") return 114;
  if (name.rfind("h100", 0) == 0 || name.rfind("h200", 0) == 0) return 132;
  if (name == "b200" || name == "gb200") return 148;
  if (name == "l40s") return 142;
  if (name == "rtx4090") return 128;
  if (name == "mi300x") return 304;
  return 108;
}

GpuCostModel::GpuCostModel(GpuSpec gpu, GpuEfficiency efficiency)
    : gpu_(std::move(gpu)), efficiency_(efficiency) {
  if (efficiency_.sm_count <= 0) efficiency_.sm_count = default_sm_count(gpu_.name);
  check_invariant(gpu_.bf16_flops > 0 && gpu_.hbm_bandwidth_Bps > 0,
                  "GPU spec without bf16 peak or HBM bandwidth");
}

double GpuCostModel::peak_flops(DType dtype) const {
  double v = 0;
  switch (dtype) {
    case DType::FP8:
      v = gpu_.fp8_flops > 0 ? gpu_.fp8_flops : gpu_.bf16_flops;
      break;
    case DType::FP16:
      v = gpu_.fp16_flops > 0 ? gpu_.fp16_flops : gpu_.bf16_flops;
      break;
    case DType::BF16:
      v = gpu_.bf16_flops;
      break;
    case DType::TF32:
      v = gpu_.tf32_flops > 0 ? gpu_.tf32_flops : gpu_.fp32_flops;
      break;
    case DType::FP32:
      v = gpu_.fp32_flops > 0 ? gpu_.fp32_flops : gpu_.bf16_flops / 16;
      break;
  }
  return v;
}

double GpuCostModel::matmul_efficiency(std::int64_t m, std::int64_t n, std::int64_t k,
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
  const double sms = efficiency_.sm_count;
  // Fewer tiles than SMs: libraries split K across CTAs (split-K / stream-K) to fill the GPU,
  // so only the shape saturation applies.
  const double waves = std::ceil(tiles / sms);
  const double wave = tiles < sms ? 1.0 : tiles / (waves * sms);
  return std::clamp(efficiency_.matmul_peak_fraction * std::min(shape, 1.0) * wave, 1e-3, 1.0);
}

double GpuCostModel::matmul_time_s(std::int64_t m, std::int64_t n, std::int64_t k, DType dtype,
                                   std::int64_t batch) const {
  const double flops = 2.0 * double(m) * double(n) * double(k) * double(batch);
  if (flops <= 0) return 0;
  return flops / (peak_flops(dtype) * matmul_efficiency(m, n, k, batch)) +
         efficiency_.kernel_overhead_s;
}

double GpuCostModel::memory_time_s(double bytes) const {
  if (bytes <= 0) return 0;
  return bytes / (gpu_.hbm_bandwidth_Bps * efficiency_.memory_bandwidth_fraction) +
         efficiency_.kernel_overhead_s;
}

double GpuCostModel::attention_time_s(double flops, DType dtype) const {
  if (flops <= 0) return 0;
  return flops / (peak_flops(dtype) * efficiency_.attention_fraction) +
         efficiency_.kernel_overhead_s;
}

}  // namespace loom::topo
