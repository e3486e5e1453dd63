// `loom-harness launch`: what one kernel launch costs, the figure loom's host model prices
// per eager launch (docs/calibration.md). An empty kernel, so only the launch is timed:
//  - eager_host: host seconds per cudaLaunchKernel, options.loop launches enqueued
//    back-to-back (wall clock, no synchronisation inside the loop);
//  - eager_back_to_back: GPU seconds per kernel of the same loop between two CUDA events (the
//    stream drains as fast as the host fills it, so this is the launch-bound rate);
//  - graph_back_to_back: GPU seconds per kernel of one CUDA graph of options.loop kernels
//    (no host cost per kernel: the gap the GPU itself needs between kernels);
//  - sync_round_trip: one launch then cudaStreamSynchronize, wall clock.
#include <chrono>

#include "harness/cuda_util.hpp"
#include "harness/measure.hpp"

namespace loom::harness {

namespace {

__global__ void empty_kernel() {}

using Clock = std::chrono::steady_clock;

double since(Clock::time_point begin) {
  return std::chrono::duration<double>(Clock::now() - begin).count();
}

void launch_empty(cudaStream_t stream) {
  empty_kernel<<<1, 32, 0, stream>>>();
  check_cuda(cudaGetLastError(), "empty kernel launch");
}

}  // namespace

std::vector<LaunchResult> measure_launch(const Options& options) {
  check_cuda(cudaSetDevice(0), "cudaSetDevice");
  cudaStream_t stream = nullptr;
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  const std::vector<cudaStream_t> streams = {stream};
  const std::vector<int> devices = {0};
  std::vector<LaunchResult> results;

  std::vector<double> host;
  for (int i = 0; i < options.warmup + options.iterations; ++i) {
    const Clock::time_point begin = Clock::now();
    for (int j = 0; j < options.loop; ++j) launch_empty(stream);
    const double seconds = since(begin) / options.loop;
    check_cuda(cudaStreamSynchronize(stream), "eager launches");
    if (i >= options.warmup) host.push_back(seconds);
  }
  results.push_back({"eager_host", summarize(host)});
  results.push_back({"eager_back_to_back", summarize(time_loop([&] { launch_empty(stream); },
                                                               streams, devices, options))});

  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  check_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "graph capture");
  for (int j = 0; j < options.loop; ++j) launch_empty(stream);
  check_cuda(cudaStreamEndCapture(stream, &graph), "graph capture");
  check_cuda(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  Options once = options;
  once.loop = 1;  // one graph launch per sample, options.loop kernels inside it
  std::vector<double> graphed =
      time_loop([&] { check_cuda(cudaGraphLaunch(exec, stream), "cudaGraphLaunch"); }, streams,
                devices, once);
  for (double& s : graphed) s /= options.loop;
  results.push_back({"graph_back_to_back", summarize(graphed)});
  check_cuda(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
  check_cuda(cudaGraphDestroy(graph), "cudaGraphDestroy");

  std::vector<double> round_trip;
  for (int i = 0; i < options.warmup + options.iterations; ++i) {
    const Clock::time_point begin = Clock::now();
    launch_empty(stream);
    check_cuda(cudaStreamSynchronize(stream), "launch round trip");
    if (i >= options.warmup) round_trip.push_back(since(begin));
  }
  results.push_back({"sync_round_trip", summarize(round_trip)});
  check_cuda(cudaStreamDestroy(stream), "cudaStreamDestroy");
  for (const LaunchResult& r : results) {
    fmt::print("launch {:20} {:8.2f} us  spread {:5.1f}%\n", r.what, r.time.median * 1e6,
               r.time.spread * 100);
  }
  return results;
}

}  // namespace loom::harness
