#include "harness/options.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include "harness/errors.hpp"

namespace loom::harness {

namespace {

const std::vector<std::string> ALL_DTYPES = {"bf16", "fp16", "tf32", "fp8"};
const std::vector<std::string> ALL_OPS = {"all_reduce", "all_gather", "reduce_scatter",
                                          "all_to_all", "broadcast",  "send_recv"};
const std::vector<std::string> ALL_KERNELS = {"copy", "elementwise", "reduction",
                                              "d2d",  "h2d",         "d2h"};

// A comma-separated list whose items must each be one of `allowed`.
std::vector<std::string> parse_list(const std::string& text, const std::string& flag,
                                    const std::vector<std::string>& allowed) {
  std::vector<std::string> items;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t end = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, end - begin);
    if (std::find(allowed.begin(), allowed.end(), item) == allowed.end()) {
      throw UsageError(fmt::format("{} {}: \"{}\" is not one of {}", flag, text, item,
                                   fmt::join(allowed, ", ")));
    }
    items.push_back(item);
    begin = end + 1;
  }
  return items;
}

int parse_count(const std::string& text, const std::string& flag, int min) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < min) {
    throw UsageError(fmt::format("{} {}: expected a whole number >= {}", flag, text, min));
  }
  return value;
}

Command parse_command(const std::string& word) {
  if (word == "info") return Command::INFO;
  if (word == "gemm") return Command::GEMM;
  if (word == "memory") return Command::MEMORY;
  if (word == "nccl") return Command::NCCL;
  if (word == "launch") return Command::LAUNCH;
  if (word == "help" || word == "--help" || word == "-h") return Command::HELP;
  throw UsageError(fmt::format(
      "unknown subcommand \"{}\": use info, gemm, memory, nccl or launch (--help)", word));
}

// Which flags each subcommand takes, so a flag given to the wrong one is an error.
bool takes(Command command, const std::string& flag) {
  if (flag == "-o" || flag == "-w" || flag == "-n") return true;
  switch (command) {
    case Command::GEMM:
      return flag == "--shapes" || flag == "--dtype" || flag == "--clock-warmup";
    case Command::MEMORY:
      return flag == "-b" || flag == "-e" || flag == "--kernel";
    case Command::NCCL:
      return flag == "-b" || flag == "-e" || flag == "-g" || flag == "--op" ||
             flag == "--nccl-tests-out" || flag == "--loop";
    case Command::LAUNCH:
      return flag == "--loop";
    default:
      return false;
  }
}

void set_flag(Options& o, const std::string& flag, const std::string& value) {
  if (flag == "-o")
    o.output = value;
  else if (flag == "-w")
    o.warmup = parse_count(value, flag, 0);
  else if (flag == "-n")
    o.iterations = parse_count(value, flag, 1);
  else if (flag == "--shapes")
    o.shapes_file = value;
  else if (flag == "--dtype")
    o.dtypes = parse_list(value, flag, ALL_DTYPES);
  else if (flag == "--kernel")
    o.kernels = parse_list(value, flag, ALL_KERNELS);
  else if (flag == "--op")
    o.ops = parse_list(value, flag, ALL_OPS);
  else if (flag == "-b")
    o.min_bytes = parse_size(value, flag);
  else if (flag == "-e")
    o.max_bytes = parse_size(value, flag);
  else if (flag == "-g")
    o.gpus = parse_count(value, flag, 1);
  else if (flag == "--nccl-tests-out")
    o.nccl_tests_output = value;
  else if (flag == "--loop")
    o.loop = parse_count(value, flag, 1);
  else if (flag == "--clock-warmup")
    o.clock_warmup_s = parse_count(value, flag, 0);
}

}  // namespace

std::int64_t parse_size(const std::string& text, const std::string& flag) {
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [rest, ec] = std::from_chars(text.data(), end, value);
  int shift = 0;
  if (rest + 1 == end) {
    const char unit = static_cast<char>(std::toupper(static_cast<unsigned char>(*rest)));
    shift = unit == 'K' ? 10 : unit == 'M' ? 20 : unit == 'G' ? 30 : -1;
  } else if (rest != end) {
    shift = -1;
  }
  if (ec != std::errc() || shift < 0 || value <= 0 || value > (std::int64_t{1} << (50 - shift))) {
    throw UsageError(
        fmt::format("{} {}: expected a size in bytes such as 8, 64K, 1M or 8G", flag, text));
  }
  return value << shift;
}

Options parse_options(const std::vector<std::string>& args) {
  Options o;
  if (args.empty()) return o;
  o.command = parse_command(args[0]);
  if (o.command == Command::HELP) return o;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag == "--help" || flag == "-h") return Options{};
    if (!takes(o.command, flag)) {
      throw UsageError(
          fmt::format("{} {}: unknown option (see loom-harness --help)", args[0], flag));
    }
    if (i + 1 == args.size()) throw UsageError(fmt::format("{}: needs a value", flag));
    set_flag(o, flag, args[++i]);
  }
  if (o.min_bytes > o.max_bytes) {
    throw UsageError(fmt::format("-b {} is larger than -e {}: give the smaller size to -b",
                                 o.min_bytes, o.max_bytes));
  }
  return o;
}

std::string usage() {
  return R"(loom-harness: measures this machine's GPUs for loom's calibration profile

usage: loom-harness <subcommand> [options]

subcommands:
  info     GPU name, SM count, clocks, power limit, memory; driver, CUDA, cuBLAS, NCCL versions
  gemm     cuBLASLt GEMM time and TFLOP/s per dtype over a grid of shapes; each sample is
           one launch behind an L2 flush, after the clocks reach a steady state
             --dtype LIST   bf16,fp16,tf32,fp8 (fp8 = E4M3 with scales; default: all)
             --shapes FILE  "m n k" lines, e.g. from `loom calibrate shapes` (default: a grid)
             --clock-warmup S  at most S seconds of GEMMs until the rate is steady (default 10)
  memory   copy, elementwise and reduction kernel bandwidth, and cudaMemcpyAsync copies
           device-to-device, host-to-device and device-to-host (pinned), over sizes; each
           sample is one launch behind an L2 flush
             --kernel LIST  copy,elementwise,reduction,d2d,h2d,d2h (default: all)
             -b SIZE -e SIZE  smallest and largest buffer (default 8 .. 8G, doubling)
  nccl     NCCL collectives on the GPUs it sees, one process (ncclCommInitAll); each
           sample is a loop of back-to-back launches, all ranks' streams timed
             --loop N   launches per sample (default 20, as nccl-tests' -n)
             --op LIST  all_reduce,all_gather,reduce_scatter,all_to_all,broadcast,send_recv
             -b SIZE -e SIZE  message sizes (default 8 .. 8G, doubling)
             -g N       GPUs to use (default: all)
             --nccl-tests-out FILE  also write the nccl-tests format table there
  launch   the cost of a kernel launch: host time per eager launch, the GPU's gap between
           back-to-back kernels in a CUDA graph, a launch-and-synchronise round trip
             --loop N   launches per sample (default 20)

common options:
  -o FILE  write the profile JSON (docs/calibration.md) to FILE
  -w N     warm-up runs before timing (default 5)
  -n N     timed samples; median and spread are over these (default 20)

exit status: 0 measured, 2 bad arguments or the machine cannot measure (no GPU, too
little memory, NCCL cannot start)
)";
}

}  // namespace loom::harness
