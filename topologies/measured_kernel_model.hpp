#pragma once
// A kernel-time model calibrated by measurements on the GPU (loom-harness `gemm` and `memory`
// sections of a calibration profile, docs/calibration.md). GEMMs take the measured time at a
// measured shape and, elsewhere, the datasheet model's time scaled by the measured/datasheet
// time ratio of the nearest measured shapes of their tensor-core dtype; memory-bound work
// streams at the measured bandwidth. Everything else (attention, dtypes without points) is
// the datasheet model's. The tables are plain data so topologies/ does not depend on sim/;
// sim/calibration converts a profile into them. `simulate --calibration` no longer uses it:
// it fits the datasheet model's parameters to the same measurements (topologies/kernel_fit.hpp,
// FittedKernelModel), so a shape between or beyond the measured ones follows the model's
// law rather than a neighbour's ratio; this model stays for comparison and its tests.
#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "topologies/kernel_model.hpp"
#include "topologies/scaled_kernel_model.hpp"

namespace loom::topo {

/// One measured GEMM D[m x n] = A[m x k]·B[k x n] in a tensor-core dtype.
struct MeasuredGemm {
  DType dtype = DType::BF16;  ///< the tensor-core dtype it ran in (TF32 for fp32 data)
  std::int64_t m = 0, n = 0, k = 0;
  double seconds = 0;  ///< median kernel time, seconds
};

/// What MeasuredKernelModel is calibrated with.
struct MeasuredKernels {
  std::vector<MeasuredGemm> gemms;
  /// Streaming bandwidth of an elementwise kernel at the largest measured size, bytes/s;
  /// unset: the datasheet's HBM bandwidth x GpuEfficiency::memory_bandwidth_fraction.
  std::optional<double> memory_Bps;
};

/// The datasheet model of `gpu` and `efficiency` corrected by `measured` (see the header
/// comment and docs/calibration.md "How the profile is used"). peak_flops is the
/// datasheet's, so MFU keeps its denominator.
class MeasuredKernelModel final : public KernelTimeModel {
 public:
  /// Throws InternalError when a measured point has a non-positive shape or time, or the
  /// bandwidth is not > 0 (the profile reader rejects those first).
  MeasuredKernelModel(GpuSpec gpu, GpuEfficiency efficiency, MeasuredKernels measured);

  double seconds(const KernelOp& op, KernelPass pass, DType math) const override;
  double peak_flops(DType math) const override { return datasheet_.peak_flops(math); }
  DType peak_dtype(DType math) const override { return datasheet_.peak_dtype(math); }
  Fp8Recipe default_fp8_recipe() const override { return datasheet_.default_fp8_recipe(); }

  /// Measured time / datasheet time of a single [m x k]·[k x n] GEMM in tensor-core dtype
  /// `tensor`: the measured point's ratio at a measured shape, else the inverse-distance
  /// weighted geometric mean of the NEIGHBOURS nearest points' ratios in (log m, log n,
  /// log k); nullopt when `tensor` has no points.
  std::optional<double> gemm_ratio(std::int64_t m, std::int64_t n, std::int64_t k,
                                   DType tensor) const;
  /// The datasheet model underneath (its memory bandwidth is the measured one, if any).
  const DatasheetKernelModel& datasheet() const { return datasheet_; }

  /// Measured shapes whose ratios are interpolated.
  static constexpr int NEIGHBOURS = 4;

 private:
  // One measured shape with its datasheet time and log-space coordinates.
  struct Point {
    MeasuredGemm gemm;
    double ratio = 1;                   // measured / datasheet
    std::array<double, 3> log_shape{};  // log m, log n, log k
  };
  // Seconds of a GEMM pass of shape [m x k]·[k x n] doing `flops`, from the datasheet time
  // `datasheet_s` of that pass.
  double gemm_pass_s(const KernelOp& op, std::int64_t m, std::int64_t n, std::int64_t k,
                     double flops, double datasheet_s, DType math) const;
  const Point* exact(std::int64_t m, std::int64_t n, std::int64_t k, DType tensor) const;

  DatasheetKernelModel datasheet_;
  std::array<std::vector<Point>, DTYPE_COUNT> points_;  // by dtype_index of the tensor dtype
};

/// `efficiency` with memory_bandwidth_fraction set so the datasheet's HBM bandwidth of `gpu`
/// streams at `bytes_per_second`.
GpuEfficiency with_memory_bandwidth(const GpuSpec& gpu, GpuEfficiency efficiency,
                                    double bytes_per_second);

}  // namespace loom::topo
