#pragma once
// The measurements, one function per subcommand. Declared without CUDA types so main.cpp
// reads as plain C++; defined in device_info.cpp, gemm.cpp, memory.cu and nccl.cpp, which
// need the CUDA toolkit. Each throws DeviceError (exit 2) when the machine cannot measure.
#include <string>
#include <vector>

#include "harness/nccl_tests_format.hpp"
#include "harness/options.hpp"
#include "harness/profile.hpp"
#include "harness/shapes.hpp"

namespace loom::harness {

/// GPU 0 and the software stack; throws DeviceError when no CUDA device is visible.
DeviceInfo query_device();
/// The name of every visible GPU, by CUDA device index.
std::vector<std::string> gpu_names();

/// NVML's current SM clock of GPU 0, MHz; 0 when NVML is not there.
double current_sm_clock_mhz();

/// cuBLASLt GEMMs of `shapes` in each of `options.dtypes`, on GPU 0, after warming the
/// clocks to a steady rate (recorded in `clock`).
std::vector<GemmResult> measure_gemm(const std::vector<GemmShape>& shapes, const Options& options,
                                     ClockState& clock);

/// Copy, elementwise and reduction kernels and d2d / h2d / d2h cudaMemcpyAsync copies (pinned
/// host memory) over sizes options.min_bytes .. max_bytes, GPU 0; sets clock.l2_flush_bytes.
std::vector<MemoryResult> measure_memory(const Options& options, ClockState& clock);

/// Launch costs of an empty kernel on GPU 0: eager host time, back-to-back eager and graphed
/// GPU time per kernel, launch-and-synchronise round trip.
std::vector<LaunchResult> measure_launch(const Options& options);

/// NCCL collectives of `options.ops` on the first options.gpus GPUs (all when 0), one
/// process; group sizes 1 .. N in powers of two, and N itself.
std::vector<CollectiveResult> measure_nccl(const Options& options);

/// The ranks an MPI launcher (mpirun, srun) started, from its environment; 1 without one.
int launched_ranks();

/// What every rank of an MPI launch measured, as rank 0 holds it.
struct MpiCollectives {
  bool root = false;                      ///< this process is rank 0 (it reports)
  std::vector<RankDevice> ranks;          ///< every rank's host, device and GPU (rank 0 only)
  std::vector<CollectiveResult> results;  ///< the world communicator's rows (every rank)
};

/// NCCL collectives of `options.ops` on the world of an MPI launch, one GPU per process
/// (ncclCommInitRank, the unique id broadcast over MPI): runs across nodes under mpirun or
/// srun. Throws DeviceError when this harness was built without MPI.
MpiCollectives measure_nccl_mpi(const Options& options);

}  // namespace loom::harness
