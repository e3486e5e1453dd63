#include <doctest/doctest.h>

#include "harness/errors.hpp"
#include "harness/options.hpp"

using namespace loom::harness;

TEST_CASE("harness::Options: defaults and no arguments give help") {
  const Options o = parse_options({});
  CHECK(o.command == Command::HELP);
  CHECK(o.min_bytes == 8);
  CHECK(o.max_bytes == std::int64_t{8} << 30);  // the 8 B .. 8 GiB
  CHECK(o.dtypes.size() == 4);
  CHECK(o.ops.size() == 6);
  CHECK(o.kernels ==
        std::vector<std::string>{"copy", "elementwise", "reduction", "d2d", "h2d", "d2h"});
  CHECK(parse_options({"nccl", "--help"}).command == Command::HELP);
}

TEST_CASE("harness::Options: subcommands take their flags") {
  const Options g = parse_options(
      {"gemm", "--dtype", "bf16,fp8", "--shapes", "s.txt", "-o", "p.json", "-w", "2", "-n", "50"});
  CHECK(g.command == Command::GEMM);
  CHECK(g.dtypes == std::vector<std::string>{"bf16", "fp8"});
  CHECK(g.shapes_file == "s.txt");
  CHECK(g.output == "p.json");
  CHECK(g.warmup == 2);
  CHECK(g.iterations == 50);
  const Options n =
      parse_options({"nccl", "-b", "1K", "-e", "64M", "-g", "4", "--op", "all_reduce"});
  CHECK(n.command == Command::NCCL);
  CHECK(n.min_bytes == 1024);
  CHECK(n.max_bytes == 64 << 20);
  CHECK(n.gpus == 4);
  CHECK(n.ops == std::vector<std::string>{"all_reduce"});
  CHECK(parse_options({"memory", "--kernel", "copy"}).kernels == std::vector<std::string>{"copy"});
  CHECK(parse_options({"memory", "--kernel", "h2d,d2h,d2d"}).kernels ==
        std::vector<std::string>{"h2d", "d2h", "d2d"});
  CHECK(parse_options({"info"}).command == Command::INFO);
}

TEST_CASE("harness::Options: bad arguments name the argument and the fix") {
  CHECK_THROWS_WITH_AS(
      parse_options({"bench"}),
      "unknown subcommand \"bench\": use info, gemm, memory, nccl or launch (--help)", UsageError);
  CHECK_THROWS_WITH_AS(parse_options({"gemm", "-b", "8"}),
                       "gemm -b: unknown option (see loom-harness --help)", UsageError);
  CHECK_THROWS_WITH_AS(parse_options({"gemm", "--dtype", "bf16,int8"}),
                       "--dtype bf16,int8: \"int8\" is not one of bf16, fp16, tf32, fp8",
                       UsageError);
  CHECK_THROWS_WITH_AS(
      parse_options({"memory", "--kernel", "d2d,p2p"}),
      "--kernel d2d,p2p: \"p2p\" is not one of copy, elementwise, reduction, d2d, h2d, d2h",
      UsageError);
  CHECK_THROWS_WITH_AS(parse_options({"nccl", "-e"}), "-e: needs a value", UsageError);
  CHECK_THROWS_WITH_AS(parse_options({"nccl", "-n", "0"}), "-n 0: expected a whole number >= 1",
                       UsageError);
  CHECK_THROWS_WITH_AS(parse_options({"nccl", "-b", "1G", "-e", "1M"}),
                       "-b 1073741824 is larger than -e 1048576: give the smaller size to -b",
                       UsageError);
  CHECK(UsageError("x").exit_code() == loom::ExitCode::BAD_INPUT);  // exit 2
}

TEST_CASE("harness::Options: sizes take K, M, G suffixes (powers of 1024)") {
  CHECK(parse_size("8", "-b") == 8);
  CHECK(parse_size("64k", "-b") == 65536);
  CHECK(parse_size("8G", "-e") == std::int64_t{8} << 30);
  CHECK_THROWS_AS(parse_size("0", "-b"), UsageError);
  CHECK_THROWS_AS(parse_size("1T", "-b"), UsageError);
  CHECK_THROWS_AS(parse_size("-4", "-b"), UsageError);
  CHECK_THROWS_AS(parse_size("", "-b"), UsageError);
}
