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

/// One op's rows (all with that op and `group_size`) as one nccl-tests run: header, one
/// device line per GPU (`gpu_names[i]` for rank i on `host`), results table, footer.
std::string nccl_tests_text(const std::string& op, int group_size,
                            const std::vector<CollectiveResult>& rows,
                            const std::vector<std::string>& gpu_names, const std::string& host,
                            const Options& options);

/// Every (op, group size) of `rows`, in the order they first appear, as nccl_tests_text.
std::string nccl_tests_report(const std::vector<CollectiveResult>& rows,
                              const std::vector<std::string>& gpu_names, const std::string& host,
                              const Options& options);

}  // namespace loom::harness
