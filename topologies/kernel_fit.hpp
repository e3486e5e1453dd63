#pragma once
// The kernel model's parameters fitted to measured kernels (loom-harness `gemm`, `memory` and
// `launch` sweeps, GEMM records of profiler traces): the large-GEMM fraction of the dense peak
// and the half-throughput dimension per tensor-core dtype, the output tile of wave
// quantisation, the streaming fraction of HBM bandwidth, the fused attention's fraction of the
// peak and its backward's ratio to the forward, and the per-kernel overhead, each
// from its default (the prior) within physical bounds (topologies/bounded_fit.hpp), with its
// bound status and uncertainty. FittedKernelModel times kernels with the fitted parameters,
// so a shape never measured follows the fitted curve; docs/calibration.md "Fitting the
// kernels". Plain data: sim/calibration turns a profile into KernelSamples.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "topologies/bounded_fit.hpp"
#include "topologies/kernel_model.hpp"
#include "topologies/measured_kernel_model.hpp"

namespace loom::topo {

/// One timed GEMM: `batch` GEMMs D[m x n] = A[m x k]·B[k x n] in one kernel.
struct GemmSample {
  DType dtype = DType::BF16;  ///< tensor-core dtype (TF32 for fp32 data)
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
  double seconds = 0;   ///< median time of one call, seconds
  double sigma = 0.02;  ///< standard deviation of ln(seconds) the fit assumes
  std::string source;   ///< where it came from ("harness gemm/3", "trace.json aten::mm")
};

/// One timed memory-bound kernel moving `bytes` (reads + writes).
struct MemorySample {
  double bytes = 0;
  double seconds = 0;   ///< median, seconds
  double sigma = 0.02;  ///< standard deviation of ln(seconds) the fit assumes
  std::string source;
};

/// One timed fused (flash) attention of `batch` sequences, `heads` query heads of `head_dim`
/// over `seq` tokens: the forward kernel and, when measured, the backward (dQ, dK, dV).
struct AttentionSample {
  std::int64_t batch = 1, heads = 1, seq = 0, head_dim = 0;
  bool causal = true;
  /// The implementation that ran it: PyTorch's scaled_dot_product_attention is
  /// FlashAttention-2 (AttentionKernel::FA2), Transformer Engine's the vendor's.
  AttentionKernel kernel = AttentionKernel::FA2;
  double forward_s = 0;              ///< median, seconds
  std::optional<double> backward_s;  ///< median, seconds (forward + backward - forward)
  double sigma = 0.03;               ///< standard deviation of ln(seconds) the fit assumes
  std::string source;
};

/// Launch costs loom-harness `launch` measured (each optional), seconds.
struct LaunchFigures {
  std::optional<double> eager_host_s;          ///< host time of one cudaLaunchKernel
  std::optional<double> eager_back_to_back_s;  ///< GPU time per empty kernel, stream launches
  std::optional<double> graph_back_to_back_s;  ///< GPU time per empty kernel in a CUDA graph
};

/// What the kernel fit is given.
struct KernelSamples {
  std::vector<GemmSample> gemms;
  std::vector<MemorySample> memory;
  std::vector<AttentionSample> attention;
  LaunchFigures launch;
};

/// The kernel ops loom times for `s` as a transformer layer's attention core runs it: the
/// scores and attention x V ops (models/flops.cpp attention_core: each 2·b·h·s²·d forward
/// FLOPs over the whole square, the backward twice that, the kernel skipping the masked half
/// of a causal square), fused.
std::array<KernelOp, 2> attention_ops(const AttentionSample& s);

/// One sample's fitted time against its measurement.
struct SampleResidual {
  std::string what;  ///< "bf16 8192x4096x4096", "elementwise 4096 B"
  std::string source;
  double measured_s = 0;
  double fitted_s = 0;   ///< the fitted model's time
  double default_s = 0;  ///< the default model's time
};

/// The fitted kernel parameters.
struct KernelFit {
  /// The efficiency the fitted model runs with (fitted memory fraction, overhead, tile and
  /// graph saving; GEMM fields as the prior's).
  GpuEfficiency efficiency;
  /// Per tensor-core dtype with GEMM samples (dtype_index): `efficiency` with that dtype's
  /// fitted matmul_peak_fraction and matmul_half_dim.
  std::array<std::optional<GpuEfficiency>, DTYPE_COUNT> gemm;
  /// Per head dimension with attention samples: `efficiency` with that head dimension's
  /// fitted attention_fraction and attention_backward_ratio (a kernel of its own).
  std::vector<std::pair<std::int64_t, GpuEfficiency>> attention;
  /// Every fitted parameter, in the order show prints them (GEMMs by dtype, then memory).
  std::vector<FittedParameter> parameters;
  int tile = 128;                ///< output tile edge chosen for wave quantisation
  int prior_tile = 128;          ///< the default tile
  std::vector<int> tiles_tried;  ///< tiles the GEMM fit compared (empty: no GEMM samples)
  /// graph_launch_saving_s derived from the launch sweep (overhead - graph back-to-back);
  /// unset: the default kept.
  std::optional<double> graph_saving_s;
  LaunchFigures launch;  ///< as measured
  std::vector<SampleResidual> gemm_residuals, memory_residuals, attention_residuals;
  std::vector<std::string> notes;
};

/// Fits the parameters `samples` constrain, from `prior` on `gpu` (its defaults). A dtype
/// without GEMM samples keeps its defaults, as do memory parameters without memory samples.
/// Throws InternalError on a sample with a non-positive shape, size or time.
KernelFit fit_kernels(const GpuSpec& gpu, const GpuEfficiency& prior, const KernelSamples& samples);

/// The kernel model with fitted parameters: GEMMs (and unfused attention's GEMMs) of a fitted
/// dtype at that dtype's fitted efficiency, fused attention at the nearest fitted head
/// dimension's, everything else at the fitted memory bandwidth,
/// overhead and tile with the datasheet's other defaults; a lone GEMM (batch 1, stream
/// launched) of a shape in `raw` takes that measured time as it is.
class FittedKernelModel final : public KernelTimeModel {
 public:
  /// Throws InternalError as DatasheetKernelModel does, or on a raw point without a positive
  /// shape and time.
  FittedKernelModel(GpuSpec gpu, const KernelFit& fit, std::vector<MeasuredGemm> raw = {});

  double seconds(const KernelOp& op, KernelPass pass, DType math) const override;
  double peak_flops(DType math) const override { return base_.peak_flops(math); }
  DType peak_dtype(DType math) const override { return base_.peak_dtype(math); }
  Fp8Recipe default_fp8_recipe() const override { return base_.default_fp8_recipe(); }
  /// The model GEMMs in tensor-core dtype `tensor` run on.
  const DatasheetKernelModel& gemm_model(DType tensor) const;
  /// Whether GEMMs in `tensor` run with fitted parameters.
  bool gemm_fitted(DType tensor) const {
    return gemm_[static_cast<size_t>(dtype_index(tensor))].has_value();
  }
  /// The measured shapes timed as measured.
  const std::vector<MeasuredGemm>& raw() const { return raw_; }
  /// The model fused attention of `head_dim` runs on: the fitted head dimension nearest to it
  /// (by ratio), else the base model.
  const DatasheetKernelModel& attention_model(std::int64_t head_dim) const;

 private:
  DatasheetKernelModel base_;
  std::array<std::optional<DatasheetKernelModel>, DTYPE_COUNT> gemm_;
  std::vector<std::pair<std::int64_t, DatasheetKernelModel>> attention_;
  std::vector<MeasuredGemm> raw_;
};

}  // namespace loom::topo
