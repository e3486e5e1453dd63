#pragma once
// What one harness run measured and its profile JSON: the loom-calibration format version 1
// (docs/calibration.md) with the harness's own sections ("device", "harness", "gemm",
// "memory") beside "collectives", which loom reads as it reads an nccl-tests import.
#include <cstdint>
#include <string>
#include <vector>

#include "harness/stats.hpp"

namespace loom::harness {

/// The GPU and software the measurements ran on (`loom-harness info`).
struct DeviceInfo {
  std::string name;            ///< "NVIDIA H100 80GB HBM3"
  int device_count = 0;        ///< GPUs visible to the process
  int compute_capability = 0;  ///< major*10 + minor (90 = sm_90)
  int sm_count = 0;
  double sm_clock_mhz = 0;        ///< maximum SM clock, MHz
  double memory_clock_mhz = 0;    ///< maximum memory clock, MHz
  int memory_bus_bits = 0;        ///< memory bus width, bits
  std::int64_t memory_bytes = 0;  ///< total device memory, bytes
  double power_limit_w = 0;       ///< enforced power limit, watts (0 = unknown)
  std::string driver_version;     ///< "13.0" (the CUDA version the driver supports)
  std::string runtime_version;    ///< CUDA runtime, "13.0"
  std::string cublas_version;     ///< cuBLASLt, "13.0.0"
  std::string nccl_version;       ///< "2.27.7"
};

/// One GEMM shape in one dtype: D[m,n] = A[m,k] * B[k,n].
struct GemmResult {
  std::string dtype;  ///< bf16, fp16, tf32, fp8
  std::int64_t m = 0, n = 0, k = 0;
  Timing time;            ///< seconds
  std::string algorithm;  ///< what cuBLASLt's heuristic picked, for the record
};

/// One memory-bound kernel at one buffer size.
struct MemoryResult {
  std::string kernel;      ///< copy, elementwise, reduction
  std::int64_t bytes = 0;  ///< bytes read plus written per run
  Timing time;             ///< seconds
};

/// One collective at one message size on one group of GPUs.
struct CollectiveResult {
  std::string op;          ///< loom's name: all_reduce, all_gather, ... send_recv
  int group_size = 0;      ///< ranks (GPUs) in the communicator
  int nodes = 1;           ///< distinct hosts among them
  std::int64_t bytes = 0;  ///< nccl-tests "size": total buffer bytes
  std::int64_t count = 0;  ///< elements, as nccl-tests prints them
  Timing out_of_place;     ///< seconds
  Timing in_place;         ///< seconds
};

/// One launch cost (`loom-harness launch`): what was timed, seconds per launch.
struct LaunchResult {
  std::string what;  ///< eager_host, eager_back_to_back, graph_back_to_back, sync_round_trip
  Timing time;       ///< seconds per launch
};

/// How the GEMM timings were taken: the clocks' warm-up and the L2 flush.
struct ClockState {
  double warmup_s = 0;              ///< seconds of GEMMs run until the rate was steady
  bool steady = false;              ///< the rate settled within 1 % before the time ran out
  double steady_tflops = 0;         ///< the warm-up GEMM's rate at the end
  double sm_clock_mhz = 0;          ///< NVML's SM clock after the warm-up (0 = unknown)
  std::int64_t l2_flush_bytes = 0;  ///< bytes written before every GEMM / memory sample
};

/// Everything a harness run gives, written as one profile.
struct HarnessProfile {
  DeviceInfo device;
  std::string command;  ///< the harness command line, for the record
  std::string date;     ///< UTC, ISO 8601
  ClockState clock;
  std::vector<GemmResult> gemm;
  std::vector<MemoryResult> memory;
  std::vector<CollectiveResult> collectives;
  std::vector<LaunchResult> launch;
};

/// Achieved FLOP/s of a GEMM result (2·m·n·k per median time).
double flops_per_second(const GemmResult& r);
/// Achieved bandwidth of a memory result, bytes/s.
double bytes_per_second(const MemoryResult& r);

/// The profile as JSON text, two-space indent, trailing newline. Collectives are grouped
/// into one table per (op, group size), sizes increasing, as loom's reader wants them.
std::string profile_to_json(const HarnessProfile& profile);
/// Writes the profile to `path`; throws UsageError when the file cannot be written.
void write_profile(const HarnessProfile& profile, const std::string& path);

/// The device as `loom-harness info` prints it: one "key: value" line per field.
std::string device_text(const DeviceInfo& device);

/// The current UTC time as "2025-01-31T12:00:00Z".
std::string utc_now();

}  // namespace loom::harness
