#pragma once
// CUDA helpers shared by the measuring sources: error checks that throw DeviceError with
// what failed and what to do, device buffers, the L2 flush, and CUDA-event timing in the two
// ways a measurement needs: one cold launch per sample behind an L2 flush (GEMMs and memory
// kernels, as a training step meets them), or a loop of back-to-back launches per sample
// (collectives and launch costs, as nccl-tests times them).
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <memory>
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

/// Two CUDA events that destroy themselves.
class EventPair {
 public:
  EventPair() {
    check_cuda(cudaEventCreate(&start), "cudaEventCreate");
    check_cuda(cudaEventCreate(&stop), "cudaEventCreate");
  }
  ~EventPair() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  /// Seconds between the two events, once `stop` has completed.
  double seconds() const {
    check_cuda(cudaEventSynchronize(stop), "timed run");
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    return ms * 1e-3;
  }
  cudaEvent_t start = nullptr, stop = nullptr;
};

/// Evicts the L2 cache by writing a buffer four times its size (at least 64 MiB), so the
/// next kernel reads its inputs from HBM as it would in a training step, where other layers'
/// tensors pass through L2 between two uses. The write also keeps the stream busy while the
/// host enqueues the timed launch, so launch latency stays out of the timing.
class L2Flush {
 public:
  L2Flush() {
    int device = 0, l2 = 0;
    check_cuda(cudaGetDevice(&device), "cudaGetDevice");
    check_cuda(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device), "L2 cache size");
    bytes_ = std::max<size_t>(size_t{64} << 20, 4 * static_cast<size_t>(l2));
    check_cuda(cudaMalloc(&ptr_, bytes_), "L2 flush buffer");
  }
  ~L2Flush() { cudaFree(ptr_); }
  L2Flush(const L2Flush&) = delete;
  L2Flush& operator=(const L2Flush&) = delete;
  /// Enqueues the flush on `stream`.
  void run(cudaStream_t stream) {
    check_cuda(cudaMemsetAsync(ptr_, ++value_ & 0xff, bytes_, stream), "L2 flush");
  }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  int value_ = 0;
};

/// Runs `launch` options.warmup times untimed, then options.iterations samples, each one
/// launch between two CUDA events behind an L2 flush; returns each sample's seconds.
template <typename Launch>
std::vector<double> time_cold(Launch&& launch, cudaStream_t stream, const Options& options,
                              L2Flush& flush) {
  for (int i = 0; i < options.warmup; ++i) launch();
  check_cuda(cudaStreamSynchronize(stream), "warm-up");
  EventPair events;
  std::vector<double> seconds;
  for (int i = 0; i < options.iterations; ++i) {
    flush.run(stream);
    check_cuda(cudaEventRecord(events.start, stream), "cudaEventRecord");
    launch();
    check_cuda(cudaEventRecord(events.stop, stream), "cudaEventRecord");
    seconds.push_back(events.seconds());
  }
  return seconds;
}

/// Runs `launch` options.warmup times untimed, then options.iterations samples, each a loop
/// of options.loop back-to-back launches between two CUDA events on every stream of
/// `streams` (the slowest stream's time counts, as nccl-tests waits for every rank); each
/// sample is the loop's seconds divided by its launches.
template <typename Launch>
std::vector<double> time_loop(Launch&& launch, const std::vector<cudaStream_t>& streams,
                              const std::vector<int>& devices, const Options& options) {
  for (int i = 0; i < options.warmup; ++i) launch();
  for (size_t r = 0; r < streams.size(); ++r) {
    check_cuda(cudaSetDevice(devices[r]), "cudaSetDevice");
    check_cuda(cudaStreamSynchronize(streams[r]), "warm-up");
  }
  std::vector<std::unique_ptr<EventPair>> events;
  for (size_t r = 0; r < streams.size(); ++r) {
    check_cuda(cudaSetDevice(devices[r]), "cudaSetDevice");  // an event belongs to a device
    events.push_back(std::make_unique<EventPair>());
  }
  std::vector<double> seconds;
  for (int i = 0; i < options.iterations; ++i) {
    for (size_t r = 0; r < streams.size(); ++r) {
      check_cuda(cudaSetDevice(devices[r]), "cudaSetDevice");
      check_cuda(cudaEventRecord(events[r]->start, streams[r]), "cudaEventRecord");
    }
    for (int j = 0; j < options.loop; ++j) launch();
    double slowest = 0;
    for (size_t r = 0; r < streams.size(); ++r) {
      check_cuda(cudaSetDevice(devices[r]), "cudaSetDevice");
      check_cuda(cudaEventRecord(events[r]->stop, streams[r]), "cudaEventRecord");
    }
    for (size_t r = 0; r < streams.size(); ++r) slowest = std::max(slowest, events[r]->seconds());
    seconds.push_back(slowest / options.loop);
  }
  return seconds;
}

}  // namespace loom::harness
