// `loom-harness nccl`: NCCL collectives in one process driving every GPU it uses
// (ncclCommInitAll), on groups of 1, 2, 4, ... GPUs and all of them. Sizes follow nccl-tests
// ("size" is the total buffer: all-gather's output, reduce-scatter's input), FP32 elements,
// out-of-place then in-place. All-to-all (grouped ncclSend/ncclRecv to every peer) and
// send/recv (rank r sends to r+1) have no in-place form: their in-place column repeats the
// out-of-place time. Timing as nccl-tests: each sample is a loop of --loop back-to-back
// grouped launches between CUDA events on every rank's stream; the slowest rank's loop over
// its launches is the sample (cuda_util.hpp time_loop).
#include <nccl.h>
#include <unistd.h>

#include <fstream>

#include "harness/cuda_util.hpp"
#include "harness/measure.hpp"
#include "harness/nccl_tests_format.hpp"

namespace loom::harness {

namespace {

void check_nccl(ncclResult_t status, const char* what) {
  if (status == ncclSuccess) return;
  throw DeviceError(fmt::format("{}: NCCL failed: {} (run with NCCL_DEBUG=WARN for the cause)",
                                what, ncclGetErrorString(status)));
}

// One rank's buffers and stream.
struct Rank {
  int device = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
};

// Enqueues one collective of `count` elements on every rank (count as nccl-tests passes it:
// per rank for all-gather, per output for reduce-scatter, per peer for all-to-all).
void launch(const std::string& op, std::vector<Rank>& ranks, size_t count, bool in_place) {
  const int g = static_cast<int>(ranks.size());
  check_nccl(ncclGroupStart(), "ncclGroupStart");
  for (int r = 0; r < g; ++r) {
    Rank& k = ranks[static_cast<size_t>(r)];
    auto* send = static_cast<float*>(k.send);
    auto* recv = static_cast<float*>(k.recv);
    if (op == "all_reduce") {
      check_nccl(
          ncclAllReduce(send, in_place ? send : recv, count, ncclFloat, ncclSum, k.comm, k.stream),
          "ncclAllReduce");
    } else if (op == "all_gather") {
      check_nccl(ncclAllGather(in_place ? recv + r * count : send, recv, count, ncclFloat, k.comm,
                               k.stream),
                 "ncclAllGather");
    } else if (op == "reduce_scatter") {
      check_nccl(ncclReduceScatter(send, in_place ? send + r * count : recv, count, ncclFloat,
                                   ncclSum, k.comm, k.stream),
                 "ncclReduceScatter");
    } else if (op == "broadcast") {
      check_nccl(ncclBroadcast(send, in_place ? send : recv, count, ncclFloat, 0, k.comm, k.stream),
                 "ncclBroadcast");
    } else if (op == "all_to_all") {
      for (int peer = 0; peer < g; ++peer) {
        check_nccl(ncclSend(send + peer * count, count, ncclFloat, peer, k.comm, k.stream),
                   "ncclSend");
        check_nccl(ncclRecv(recv + peer * count, count, ncclFloat, peer, k.comm, k.stream),
                   "ncclRecv");
      }
    } else {  // send_recv: a ring of point-to-point transfers
      check_nccl(ncclSend(send, count, ncclFloat, (r + 1) % g, k.comm, k.stream), "ncclSend");
      check_nccl(ncclRecv(recv, count, ncclFloat, (r + g - 1) % g, k.comm, k.stream), "ncclRecv");
    }
  }
  check_nccl(ncclGroupEnd(), op.c_str());
}

// Elements per call for a total size of `bytes` on `g` ranks, rounded as nccl-tests does.
size_t count_for(const std::string& op, std::int64_t bytes, int g) {
  const size_t total = static_cast<size_t>(bytes) / sizeof(float);
  const bool split = op == "all_gather" || op == "reduce_scatter" || op == "all_to_all";
  return split ? total / static_cast<size_t>(g) : total;
}

std::vector<CollectiveResult> measure_group(std::vector<Rank>& ranks, const Options& options) {
  const int g = static_cast<int>(ranks.size());
  std::vector<cudaStream_t> streams;
  std::vector<int> devices;
  for (const Rank& k : ranks) {
    streams.push_back(k.stream);
    devices.push_back(k.device);
  }
  std::vector<CollectiveResult> results;
  for (const std::string& op : options.ops) {
    std::vector<CollectiveResult> rows;
    for (std::int64_t bytes = options.min_bytes; bytes <= options.max_bytes; bytes *= 2) {
      const size_t count = count_for(op, bytes, g);
      if (count == 0) continue;
      const bool split = op == "all_gather" || op == "reduce_scatter" || op == "all_to_all";
      CollectiveResult r{op,
                         g,
                         static_cast<std::int64_t>(count * (split ? g : 1) * sizeof(float)),
                         static_cast<std::int64_t>(count),
                         {},
                         {}};
      r.out_of_place =
          summarize(time_loop([&] { launch(op, ranks, count, false); }, streams, devices, options));
      const bool has_in_place = op != "all_to_all" && op != "send_recv";
      r.in_place = has_in_place ? summarize(time_loop([&] { launch(op, ranks, count, true); },
                                                      streams, devices, options))
                                : r.out_of_place;
      for (Rank& k : ranks) {
        check_cuda(cudaSetDevice(k.device), "cudaSetDevice");
        check_cuda(cudaStreamSynchronize(k.stream), op.c_str());
      }
      rows.push_back(r);
    }
    results.insert(results.end(), rows.begin(), rows.end());
  }
  return results;
}

// Group sizes measured on `n` GPUs: 1, 2, 4, ... and n.
std::vector<int> group_sizes(int n) {
  std::vector<int> sizes;
  for (int g = 1; g < n; g *= 2) sizes.push_back(g);
  sizes.push_back(n);
  return sizes;
}

}  // namespace

std::vector<CollectiveResult> measure_nccl(const Options& options) {
  const std::vector<std::string> names = gpu_names();
  const int available = static_cast<int>(names.size());
  if (options.gpus > available) {
    throw DeviceError(fmt::format("-g {}: this machine has {} GPU(s); give -g {} or fewer",
                                  options.gpus, available, available));
  }
  const int n = options.gpus > 0 ? options.gpus : available;
  const size_t buffer = static_cast<size_t>(options.max_bytes) + 64;
  std::vector<CollectiveResult> results;
  for (int g : group_sizes(n)) {
    std::vector<Rank> ranks(static_cast<size_t>(g));
    std::vector<ncclComm_t> comms(static_cast<size_t>(g));
    std::vector<int> devices;
    for (int d = 0; d < g; ++d) devices.push_back(d);
    check_nccl(ncclCommInitAll(comms.data(), g, devices.data()),
               fmt::format("ncclCommInitAll on {} GPU(s)", g).c_str());
    for (int d = 0; d < g; ++d) {
      Rank& k = ranks[static_cast<size_t>(d)];
      k.device = d;
      k.comm = comms[static_cast<size_t>(d)];
      check_cuda(cudaSetDevice(d), "cudaSetDevice");
      check_cuda(cudaStreamCreate(&k.stream), "cudaStreamCreate");
      check_cuda(cudaMalloc(&k.send, buffer), "NCCL send buffer (lower -e)");
      check_cuda(cudaMalloc(&k.recv, buffer), "NCCL receive buffer (lower -e)");
      check_cuda(cudaMemset(k.send, 0, buffer), "cudaMemset");
    }
    std::vector<CollectiveResult> rows = measure_group(ranks, options);
    for (Rank& k : ranks) {
      cudaSetDevice(k.device);
      cudaFree(k.send);
      cudaFree(k.recv);
      cudaStreamDestroy(k.stream);
      ncclCommDestroy(k.comm);
    }
    results.insert(results.end(), rows.begin(), rows.end());
  }
  return results;
}

}  // namespace loom::harness
