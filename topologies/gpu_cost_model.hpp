#pragma once
// The GPU kernel-time model: how long one kernel takes on one GPU, from its shape and the
// GPU's datasheet (topologies/gpu_catalog.hpp). Matrix multiplies run at the dense peak of
// their dtype times an efficiency that falls for small or skinny shapes (a saturation per
// dimension) and for partial last waves of output tiles (wave quantisation); memory-bound
// kernels run at HBM bandwidth times an efficiency; fused (flash) attention runs its FLOPs
// at an attention efficiency. Every coefficient is a named field of GpuEfficiency so that a
// calibration profile can replace the datasheet defaults (docs/simulate.md lists them).
#include <cstdint>
#include <string>

#include "topologies/gpu_catalog.hpp"

namespace loom::topo {

/// Element types a kernel computes in.
enum class DType { FP32, TF32, BF16, FP16, FP8 };

/// Named efficiency coefficients of the kernel-time model. Defaults are physical and
/// documented in docs/simulate.md; they are not fitted to any particular run.
struct GpuEfficiency {
  /// Fraction of the dense datasheet peak a large, square, tile-aligned GEMM reaches
  /// (cuBLAS on A100/H100 reaches 75-85% of dense peak for 8k x 8k x 8k bf16).
  double matmul_peak_fraction = 0.80;
  /// Dimension (elements) at which a GEMM dimension alone halves throughput: per-dimension
  /// efficiency is x / (x + matmul_half_dim). Models under-filled tiles and short K loops.
  double matmul_half_dim = 48;
  /// Output tile edge (elements) used for wave quantisation (128 x 128 CTA tiles).
  int matmul_tile = 128;
  /// Streaming multiprocessors (or CUs) that run tiles concurrently; 0: from the GPU name.
  int sm_count = 0;
  /// Fraction of datasheet HBM bandwidth a streaming elementwise kernel reaches.
  double memory_bandwidth_fraction = 0.80;
  /// Fraction of dense peak a fused (flash) attention kernel reaches, forward.
  double attention_fraction = 0.55;
  /// Backward fused attention throughput relative to forward (FlashAttention-2 backward
  /// runs its 2x FLOPs at about 0.8 of the forward rate, Dao 2023, Fig. 5-6).
  double attention_backward_ratio = 0.8;
  /// Fixed per-kernel launch and tail cost, in seconds.
  double kernel_overhead_s = 4e-6;
};

/// Kernel durations on one GPU model.
class GpuCostModel {
 public:
  /// Uses `gpu`'s datasheet and `efficiency`; sm_count 0 is filled from the GPU name.
  explicit GpuCostModel(GpuSpec gpu, GpuEfficiency efficiency = {});

  /// Dense peak in FLOP/s for `dtype` (falls back to the next wider dtype the GPU has).
  double peak_flops(DType dtype) const;
  /// Fraction of peak a [m x k] · [k x n] GEMM (repeated `batch` times) reaches, in (0, 1].
  double matmul_efficiency(std::int64_t m, std::int64_t n, std::int64_t k,
                           std::int64_t batch = 1) const;
  /// Seconds for `batch` GEMMs of [m x k] · [k x n] in `dtype` (2·m·n·k FLOPs each).
  double matmul_time_s(std::int64_t m, std::int64_t n, std::int64_t k, DType dtype,
                       std::int64_t batch = 1) const;
  /// Seconds for a memory-bound kernel moving `bytes` to and from HBM.
  double memory_time_s(double bytes) const;
  /// Seconds for fused attention performing `flops` in `dtype` (backward: pass the backward
  /// FLOPs; the same efficiency applies).
  double attention_time_s(double flops, DType dtype) const;

  const GpuSpec& gpu() const { return gpu_; }
  const GpuEfficiency& efficiency() const { return efficiency_; }

 private:
  GpuSpec gpu_;
  GpuEfficiency efficiency_;
};

/// Streaming multiprocessors of a catalog GPU (A100 108, H100 SXM 132, ...); 108 if unknown.
int default_sm_count(const std::string& gpu_name);

}  // namespace loom::topo
