// Issue 33, "Silent traps get a note" and --require-fit's fix: a pipeline given fewer
// micro-batches than stages says so and how to set --gbs; no "pipeline bubble" row without a
// pipeline; the plan line names the overlap switches in effect; a plan that does not fit names
// the one-switch changes that would lower its peak, with the bytes each saves (exit 3).
#include <doctest/doctest.h>

#include <regex>
#include <string>

#include "tests/cli/cli_run.hpp"

using loom::testing::Run;
using loom::testing::run_loom;
using loom::testing::TempDir;

TEST_CASE("cli::trap_notes: pp 4 with one micro-batch says so and how to set --gbs") {
  const TempDir dir("trap_mb");
  const Run r =
      run_loom(dir, "simulate --model llama3-8b --cluster dgx-h100 --nodes 4 --tp 8 --pp 4");
  INFO(r.out.substr(0, 1500));
  REQUIRE(r.status == 0);
  CHECK(r.out.find("note: 1 micro-batch for 4 pipeline stages (--gbs not given: gbs = mbs x dp = "
                   "1): the pipeline idles ") != std::string::npos);
  CHECK(r.out.find("set --gbs (e.g. --gbs 16 for 16 micro-batches of mbs 1 x dp 1)") !=
        std::string::npos);
  CHECK(r.out.find("pipeline bubble") != std::string::npos);
  // Enough micro-batches: no note.
  const Run full = run_loom(
      dir, "simulate --model llama3-8b --cluster dgx-h100 --nodes 4 --tp 8 --pp 4 --gbs 16");
  REQUIRE(full.status == 0);
  CHECK(full.out.find("note: ") == std::string::npos);
}

TEST_CASE("cli::trap_notes: no pipeline bubble row, nor its note, with --pp 1") {
  const TempDir dir("trap_pp1");
  const Run r = run_loom(dir, "simulate --model llama3-8b --cluster dgx-h100 --tp 8");
  REQUIRE(r.status == 0);
  CHECK(r.out.find("pipeline bubble") == std::string::npos);
  CHECK(r.out.find("step time") != std::string::npos);
}

TEST_CASE("cli::trap_notes: the plan line names the overlap switches in effect") {
  const TempDir dir("trap_overlap");
  const Run r = run_loom(dir,
                         "simulate --model llama3-8b --cluster dgx-h100 --nodes 2 --tp 8 "
                         "--zero 1 --overlap-grad-reduce --overlap-param-gather");
  INFO(r.out.substr(0, 800));
  REQUIRE(r.status == 0);
  CHECK(r.out.find("; overlap grad-reduce, param-gather") != std::string::npos);
  const Run none = run_loom(dir, "simulate --model llama3-8b --cluster dgx-h100 --nodes 2 --tp 8");
  REQUIRE(none.status == 0);
  CHECK(none.out.find("; overlap ") == std::string::npos);
}

TEST_CASE("cli::trap_notes: --require-fit names what would make the plan fit, exit 3") {
  const TempDir dir("trap_fit");
  const Run r = run_loom(dir, "memory --model llama3-8b --gpu h100 --dp 8 --require-fit");
  INFO(r.err);
  CHECK(r.status == 3);
  CHECK(r.err.rfind("loom: error: --require-fit: stage 0 needs ", 0) == 0);
  CHECK(r.err.find("peak per GPU, one change at a time: ") != std::string::npos);
  // One ZeRO stage is named: the lowest that fits (ZeRO-2 here: 16 bytes of Adam state per
  // parameter over 8 ranks, gradients sharded too).
  CHECK(r.err.find("--zero 2 saves ") != std::string::npos);
  CHECK(r.err.find("--zero 1 saves ") == std::string::npos);
  CHECK(r.err.find("--zero 3 saves ") == std::string::npos);
  CHECK(r.err.find("(fits)") != std::string::npos);
  CHECK(r.err.find("--tp 2 --dp 4 saves ") != std::string::npos);
  CHECK(r.err.find('\n') == r.err.size() - 1);
  // Each saving is the memory model run again: --zero 2 alone, asked of `loom memory`, has the
  // peak the message implies (peak before minus the saving).
  std::smatch m;
  REQUIRE(std::regex_search(r.err, m, std::regex("needs ([0-9.]+) GiB")));
  const double before = std::stod(m[1]);
  REQUIRE(std::regex_search(r.err, m, std::regex("--zero 2 saves ([0-9.]+) GiB")));
  const double saved = std::stod(m[1]);
  const Run z3 = run_loom(dir, "memory --model llama3-8b --gpu h100 --dp 8 --zero 2");
  REQUIRE(z3.status == 0);
  REQUIRE(std::regex_search(z3.out, m, std::regex("peak: stage \\d+, ([0-9.]+) GiB")));
  CHECK(std::stod(m[1]) == doctest::Approx(before - saved).epsilon(0.001));
}
