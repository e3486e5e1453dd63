#pragma once
// The harness's command line: `loom-harness <info|gemm|memory|nccl|launch> [options]`, parsed
// without CUDA so the tests check it on any machine.
#include <cstdint>
#include <string>
#include <vector>

namespace loom::harness {

/// What to measure.
enum class Command { HELP, INFO, GEMM, MEMORY, NCCL, LAUNCH };

/// Everything the command line sets; defaults are the documented ones (harness/README.md).
struct Options {
  Command command = Command::HELP;
  std::string output;       ///< -o: the profile JSON to write ("" = none)
  std::string shapes_file;  ///< gemm --shapes: "m n k" lines (`loom calibrate shapes`)
  std::vector<std::string> dtypes = {"bf16", "fp16", "tf32", "fp8"};  ///< gemm --dtype
  std::vector<std::string> ops = {"all_reduce", "all_gather", "reduce_scatter",
                                  "all_to_all", "broadcast",  "send_recv"};  ///< nccl --op
  std::vector<std::string> kernels = {"copy", "elementwise", "reduction",
                                      "d2d",  "h2d",         "d2h"};  ///< memory --kernel
  std::int64_t min_bytes = 8;                                         ///< -b: smallest size, bytes
  std::int64_t max_bytes = std::int64_t{8} << 30;                     ///< -e: largest size, bytes
  int gpus = 0;         ///< -g: GPUs to use (0 = all it sees)
  int warmup = 5;       ///< -w: untimed runs before timing
  int iterations = 20;  ///< -n: timed samples; the median and spread are over these
  int loop = 20;  ///< --loop: back-to-back launches per sample (nccl, launch), as nccl-tests' -n
  double clock_warmup_s = 10;     ///< gemm --clock-warmup: at most this long to reach steady clocks
  std::string nccl_tests_output;  ///< nccl --nccl-tests-out: also write that text to a file
};

/// Parses the arguments after the program name; throws UsageError naming the bad argument
/// and the fix. `--help` / no arguments give Command::HELP.
Options parse_options(const std::vector<std::string>& args);

/// The usage text printed by `loom-harness --help`.
std::string usage();

/// A size with an optional K/M/G suffix (powers of 1024), as nccl-tests' -b/-e take it;
/// throws UsageError naming `flag` when it is not a positive size.
std::int64_t parse_size(const std::string& text, const std::string& flag);

}  // namespace loom::harness
