#pragma once
// CUDA helpers shared by the measuring sources: error checks that throw DeviceError with
// what failed and what to do, device buffers, and repeated CUDA-event timing.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <vector>

#include "harness/errors.hpp"
#include "harness/options.hpp"

namespace loom::harness {

/// Throws DeviceError naming `what` when `status` is an error; out of memory says so.
inline void check_cuda(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  if (status == cudaErrorMemoryAllocation) {
    throw DeviceError(
        fmt::format("{}: too little GPU memory ({}); lower -e, use smaller shapes, or free the GPU",
                    what, cudaGetErrorString(status)));
  }
  if (status == cudaErrorNoDevice || status == cudaErrorInsufficientDriver) {
    throw DeviceError(
        fmt::format("no CUDA device: run loom-harness on a machine with an NVIDIA GPU ({}: {})",
                    what, cudaGetErrorString(status)));
  }
  throw DeviceError(fmt::format("{}: {}", what, cudaGetErrorString(status)));
}

/// A device allocation that frees itself.
class DeviceBuffer {
 public:
  /// Allocates `bytes` on the current device; throws DeviceError (too little memory).
  explicit DeviceBuffer(size_t bytes) { check_cuda(cudaMalloc(&ptr_, bytes), "cudaMalloc"); }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
};

/// Runs `launch` (which enqueues work on `stream`) options.warmup times untimed, then
/// options.iterations times each between two CUDA events; returns each run's seconds.
template <typename Launch>
std::vector<double> time_runs(Launch&& launch, cudaStream_t stream, const Options& options) {
  for (int i = 0; i < options.warmup; ++i) launch();
  check_cuda(cudaStreamSynchronize(stream), "warm-up");
  cudaEvent_t start = nullptr, stop = nullptr;
  check_cuda(cudaEventCreate(&start), "cudaEventCreate");
  check_cuda(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<double> seconds;
  for (int i = 0; i < options.iterations; ++i) {
    cudaEventRecord(start, stream);
    launch();
    cudaEventRecord(stop, stream);
    check_cuda(cudaEventSynchronize(stop), "timed run");
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    seconds.push_back(ms * 1e-3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return seconds;
}

}  // namespace loom::harness
