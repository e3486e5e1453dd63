#pragma once
// A calibration profile: measured figures that replace datasheet coefficients where they
// exist, each with the place it came from. This slice holds collective times by (op, group
// size, nodes, bytes), imported from nccl-tests logs (calibration/nccl_tests.hpp), and
// per-class summaries of profiler traces of real runs (calibration/kineto.hpp). The file
// format is versioned JSON (docs/calibration.md); MeasuredCollectives feeds the table to
// the engine through sim's CollectiveTimeOverride hook. A profile may also hold factors
// fitted to measured runs (FitFactors), which scale the kernel model and collectives.
#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sim/calibration/network_fit.hpp"
#include "sim/calibration/trace_summary.hpp"
#include "sim/collectives.hpp"
#include "sim/engine.hpp"
#include "topologies/measured_kernel_model.hpp"
#include "topologies/scaled_kernel_model.hpp"

namespace loom::calibration {

/// The profile format version this build reads and writes.
inline constexpr int PROFILE_VERSION = 1;

/// One measured size of a collective.
struct CollectivePoint {
  double bytes = 0;    ///< nccl-tests "size" (total buffer bytes), bytes
  double seconds = 0;  ///< the time loom uses: mean of the sound measured times, seconds
  std::optional<double> out_of_place_seconds;  ///< as measured, seconds
  std::optional<double> in_place_seconds;      ///< as measured, seconds
  std::string source;                          ///< "file:line" of the row
  /// Share of the measured times that follow the size/time trend (1; 0.5: one of two
  /// broke it; 0: all did, and interpolation skips the point); a fit weighs the point by it.
  double weight = 1;
  bool out_of_place_outlier = false;  ///< the out-of-place time broke the trend
  bool in_place_outlier = false;      ///< the in-place time broke the trend
};

/// One collective measured on one group: its sizes in increasing order.
struct CollectiveTable {
  sim::CollectiveOp op = sim::CollectiveOp::ALL_REDUCE;
  int group_size = 0;   ///< ranks in the communicator
  int nodes = 0;        ///< distinct hosts among them
  std::string gpu;      ///< device name as the log printed it
  std::string program;  ///< the measuring program ("all_reduce_perf")
  std::string source;   ///< the file it was imported from
  /// How the op was inferred when the log named no program (empty: named or stated):
  /// "busbw/algbw 1.875 = 2(n-1)/n with n=16, redop sum, root -1".
  std::string op_inferred_from;
  std::string dtype;  ///< nccl-tests' "type" column ("float", "bfloat16"; empty: unknown)
  std::map<std::string, std::string> env;  ///< NCCL_* variables the log shows were set
  std::string forced_algo;   ///< NCCL_ALGO when set: not NCCL's own choice (empty: not set)
  std::string forced_proto;  ///< NCCL_PROTO when set (empty: not set)
  std::vector<CollectivePoint> points;
};

/// Physical factors fitted to measured runs (`loom calibrate fit`); an unset factor is 1.
struct FitFactors {
  /// Matmul (GEMM, attention) efficiency relative to the kernel model, by tensor-core dtype
  /// (topo::dtype_index).
  std::array<std::optional<double>, topo::DTYPE_COUNT> compute_efficiency;
  std::optional<double> memory_bound_time;  ///< memory-bound kernel time multiplier
  std::optional<double> collective_time;    ///< modelled collective time multiplier
  /// Link payload efficiency of NVLink (intra-node tier), in (0, 1] of the line rate.
  std::optional<double> nvlink_efficiency;
  /// Link payload efficiency of the inter-node tier (InfiniBand, RoCE, Ethernet), (0, 1].
  std::optional<double> network_efficiency;
  std::optional<double> host_launch_time;  ///< host seconds per eager launch multiplier
  std::string runs;                        ///< the runs file they were fitted to
  int run_count = 0;                       ///< runs used
  double mape_pct = 0;                     ///< mean |error| of step time over the runs, %
  std::optional<double> loo_mape_pct;      ///< leave-one-out mean |error|, %
};

/// The kernel-model scales of `factors` (unset ones 1).
topo::KernelScales kernel_scales(const FitFactors& factors);

/// One GEMM loom-harness timed (its `gemm[]` section): D[m x n] = A[m x k]·B[k x n].
struct GemmPoint {
  topo::DType dtype = topo::DType::BF16;  ///< the tensor-core dtype (bf16, fp16, tf32, fp8)
  std::int64_t m = 0, n = 0, k = 0;
  double seconds = 0;                              ///< median, seconds
  std::optional<double> min_seconds, max_seconds;  ///< as measured, seconds
  std::optional<double> spread;                    ///< interquartile range / median
  std::optional<std::int64_t> samples;             ///< timed runs
  std::string algorithm;                           ///< the library's algorithm, as reported
  /// Achieved rate, FLOP/s (2mnk / median).
  double flops_per_second() const { return 2.0 * double(m) * double(n) * double(k) / seconds; }
};

/// One memory kernel loom-harness timed (its `memory[]` section).
struct MemoryPoint {
  std::string kernel;  ///< "copy", "elementwise", "reduction"; "d2d", "h2d", "d2h" (memcpy)
  double bytes = 0;    ///< read + written per run, bytes
  double seconds = 0;  ///< median, seconds
  std::optional<double> min_seconds, max_seconds;  ///< as measured, seconds
  std::optional<double> spread;                    ///< interquartile range / median
  std::optional<std::int64_t> samples;             ///< timed runs
  /// Achieved bandwidth, bytes/s.
  double bytes_per_second() const { return bytes / seconds; }
};

/// What a profile holds.
struct Profile {
  std::vector<CollectiveTable> collectives;
  std::vector<GemmPoint> gemms;     ///< loom-harness `gemm[]`, in file order
  std::vector<MemoryPoint> memory;  ///< loom-harness `memory[]`, in file order
  /// loom-harness `harness` and `device` objects, kept as JSON text (empty: absent) so a
  /// profile read and written again keeps them.
  std::string harness_json, device_json;
  /// loom-harness `launch` array (launch costs), kept as JSON text (empty: absent); the kernel
  /// fit reads it (calibration/kernel_fit_profile.hpp).
  std::string launch_json;
  /// Fused attention timings (`attention[]`, scripts/device-check's SDPA sweep), kept as JSON
  /// text (empty: absent); the kernel fit reads them (calibration/kernel_fit_profile.hpp).
  std::string attention_json;
  std::vector<TraceSummary> traces;   ///< profiler traces of real runs (calibration/kineto.hpp)
  std::optional<FitFactors> factors;  ///< fitted factors, when `calibrate fit` wrote them
  /// The network fitted to the collective tables (`calibrate fit-network`; network_fit.hpp).
  std::optional<FittedNetwork> network;
};

/// The kernel-model tables of `profile`'s GEMM and memory points (topo::MeasuredKernelModel):
/// every GEMM point, and the bandwidth of the largest elementwise point (else the largest
/// copy point); reduction points are not used.
topo::MeasuredKernels measured_kernels(const Profile& profile);
/// Whether `profile` has GEMM or memory points the kernel model would use.
bool has_kernel_measurements(const Profile& profile);

/// Adds `table` to `profile`, sorted by (op, group size, nodes). Throws CalibrationError when
/// the profile already measures one of its sizes for the same (op, group size, nodes).
void add_table(Profile& profile, CollectiveTable table);

/// The profile as JSON text (docs/calibration.md), two-space indent, trailing newline.
std::string profile_to_json(const Profile& profile);
/// Writes the profile to `path` in one step (replace_file: a failed write leaves the old file);
/// throws CalibrationError with the system's reason when the file cannot be written.
void write_profile(const Profile& profile, const std::string& path);
/// Reads a profile file; throws ConfigError naming the file and JSON pointer on a missing,
/// malformed or other-version file.
Profile read_profile(const std::string& path);
/// read_profile on the text of a profile; `origin` names it in errors.
Profile parse_profile(const std::string& text, const std::string& origin);

/// The time of `bytes` on `table` interpolated linearly in (log size, log time) between the
/// two measured sizes around it, seconds; nullopt outside the measured range.
std::optional<double> interpolate(const CollectiveTable& table, double bytes);

/// A profile's collective tables as the engine's override: a request the profile measures
/// for its (op, group size, nodes), within the measured sizes, gets the interpolated time.
class MeasuredCollectives : public sim::CollectiveTimeOverride {
 public:
  explicit MeasuredCollectives(Profile profile) : profile_(std::move(profile)) {}
  /// See sim::CollectiveTimeOverride; seconds.
  std::optional<double> seconds(sim::CollectiveOp op, int group_size, int nodes,
                                double bytes) const override;
  /// The table for (op, group size, nodes), or nullptr.
  const CollectiveTable* find(sim::CollectiveOp op, int group_size, int nodes) const;
  const Profile& profile() const { return profile_; }

 private:
  Profile profile_;
};

}  // namespace loom::calibration
