#pragma once
// The harness's collective results printed as nccl-tests prints them (NVIDIA/nccl-tests
// src/util.cu: the "# nThread" header, "#  Rank" device lines, the results header and rows
// with out-of-place and in-place time/algbw/busbw), so `loom calibrate import` and anyone
// used to nccl-tests read the harness's table as they read all_reduce_perf's.
#include <string>
#include <vector>

#include "harness/options.hpp"
#include "harness/profile.hpp"

namespace loom::harness {

/// The nccl-tests program that measures `op` ("all_reduce" -> "all_reduce_perf").
std::string nccl_tests_program(const std::string& op);

/// nccl-tests' bus-bandwidth factor for `op` on `ranks` GPUs (src/*.cu GetBw): all-reduce
/// 2(n-1)/n; all-gather, reduce-scatter, all-to-all (n-1)/n; broadcast, send/recv 1.
double bus_bandwidth_factor(const std::string& op, int ranks);

/// The nccl-tests element type and reduction the harness runs `op` with ("float", "sum").
std::string nccl_tests_type(const std::string& op);
std::string nccl_tests_redop(const std::string& op);

/// Where one rank ran: its host, its CUDA device index there, the GPU's name.
struct RankDevice {
  std::string host;
  int device = 0;
  std::string name;
};

/// Rank i on device i of `host` for each of `gpu_names` (one process driving them all).
std::vector<RankDevice> one_host(const std::vector<std::string>& gpu_names,
                                 const std::string& host);

/// One op's rows (all with that op and `group_size`) as one nccl-tests run: header, one
/// device line per rank (`ranks[i]` for rank i), results table, footer.
std::string nccl_tests_text(const std::string& op, int group_size,
                            const std::vector<CollectiveResult>& rows,
                            const std::vector<RankDevice>& ranks, const Options& options);

/// Every (op, group size) of `rows`, in the order they first appear, as nccl_tests_text.
std::string nccl_tests_report(const std::vector<CollectiveResult>& rows,
                              const std::vector<RankDevice>& ranks, const Options& options);

}  // namespace loom::harness
