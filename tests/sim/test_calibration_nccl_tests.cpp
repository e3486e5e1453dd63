// The nccl-tests importer on test inputs written to the nccl-tests format
// (tests/sim/calibration_data/README.md): op, group size, nodes, rows, noise, truncation, errors.
#include <doctest/doctest.h>

#include <string>

#include "common/error.hpp"
#include "sim/calibration/nccl_tests.hpp"
#include "tests/source_path.hpp"

using loom::testing::source_path;

using namespace loom;
using namespace loom::calibration;

namespace {
std::string data(const char* name) {
  return source_path("tests/sim/calibration_data/") + name;
}
}  // namespace

TEST_CASE("calibration::NcclTests: a noisy single-node all_reduce log") {
  const ImportResult r = import_files({data("all_reduce_1node_noisy.txt")});
  REQUIRE(r.tables.size() == 1);
  const CollectiveTable& t = r.tables[0];
  CHECK(t.op == sim::CollectiveOp::ALL_REDUCE);
  CHECK(t.program == "all_reduce_perf");
  CHECK(t.group_size == 8);
  CHECK(t.nodes == 1);
  CHECK(t.gpu == "NVIDIA H100 80GB HBM3");
  // -b 8 -e 128M -f 2: 25 sizes; NCCL INFO lines in between are not rows.
  REQUIRE(t.points.size() == 25);
  CHECK(t.points.front().bytes == 8);
  CHECK(t.points.back().bytes == 134217728);
  // First row (line 27 of the file): out-of-place 14.03 us, in-place 13.97 us.
  CHECK(t.points.front().out_of_place_seconds.value() == doctest::Approx(14.03e-6).scale(0));
  CHECK(t.points.front().in_place_seconds.value() == doctest::Approx(13.97e-6).scale(0));
  CHECK(t.points.front().seconds == doctest::Approx(14.0e-6).scale(0));
  CHECK(t.points.front().source == data("all_reduce_1node_noisy.txt") + ":27");
  CHECK(r.notes.empty());
}

TEST_CASE("calibration::NcclTests: a two-node log counts hosts and takes the op from mpirun") {
  const ImportResult r = import_files({data("all_gather_2node.txt")});
  REQUIRE(r.tables.size() == 1);
  CHECK(r.tables[0].op == sim::CollectiveOp::ALL_GATHER);
  CHECK(r.tables[0].group_size == 16);
  CHECK(r.tables[0].nodes == 2);
  CHECK(r.tables[0].points.size() == 21);  // 1K .. 1G, factor 2
}

TEST_CASE("calibration::NcclTests: a truncated log keeps the rows before the cut") {
  const ImportResult r = import_files({data("reduce_scatter_truncated.txt")});
  REQUIRE(r.tables.size() == 1);
  CHECK(r.tables[0].op == sim::CollectiveOp::REDUCE_SCATTER);
  CHECK(r.tables[0].group_size == 4);
  CHECK(r.tables[0].points.size() == 7);
  REQUIRE(r.notes.size() == 1);
  CHECK(r.notes[0].find("reduce_scatter_truncated.txt:20: the log is cut off") !=
        std::string::npos);
}

TEST_CASE("calibration::NcclTests: a malformed row names the file and line") {
  const std::string file = data("broadcast_malformed.txt");
  const std::string want = file + ":14: out-of-place time '17x07'";
  CHECK_THROWS_WITH_AS(import_files({file}), doctest::Contains(want.c_str()), CalibrationError);
}

TEST_CASE("calibration::NcclTests: an unrecognised file is an error at its first line") {
  const std::string file = data("not_nccl_tests.csv");
  const std::string want = file + ":1: not a format";
  CHECK_THROWS_WITH_AS(import_files({file}), doctest::Contains(want.c_str()), CalibrationError);
}

TEST_CASE("calibration::NcclTests: a table needs its program and device lines") {
  const std::string header =
      "#       size         count      type   redop    root     time   algbw   busbw  #wrong     "
      "time   algbw   busbw  #wrong\n"
      "        1024           256     float     sum      -1    10.00    0.10    0.10       0    "
      "10.00    0.10    0.10       0\n";
  CHECK_THROWS_WITH_AS(
      parse_nccl_tests("# Collective test starting: all_reduce_perf\n" + header, "x.log"),
      doctest::Contains("x.log:2: a nccl-tests table without the '#  Rank"), CalibrationError);
  const std::string device =
      "#  Rank  0 Group  0 Pid   4100 on    dgx-a07 device  0 [0000:18:00] NVIDIA H100 80GB HBM3\n"
      "#  Rank  1 Group  0 Pid   4101 on    dgx-a07 device  1 [0000:2a:00] NVIDIA H100 80GB HBM3\n";
  // Without a program the columns decide; on 2 ranks all_reduce's 2(n-1)/n is 1, as for
  // sendrecv, and both print a redop and root -1: only --op can tell.
  CHECK_THROWS_WITH_AS(parse_nccl_tests(device + header, "y.log"),
                       doctest::Contains("y.log:3: the log names no '<op>_perf' program and "
                                         "nccl-tests prints send_recv and all_reduce alike"),
                       CalibrationError);
  CHECK_THROWS_WITH_AS(parse_nccl_tests("$ ./alltoallv_perf\n" + device + header, "z.log"),
                       doctest::Contains("'alltoallv_perf' has no loom collective"),
                       CalibrationError);
  const ImportResult ok =
      parse_nccl_tests("$ ./all_reduce_perf -g 2\n" + device + header, "ok.log");
  REQUIRE(ok.tables.size() == 1);
  CHECK(ok.tables[0].group_size == 2);
  CHECK(ok.tables[0].points[0].seconds == doctest::Approx(10e-6).scale(0));
}

TEST_CASE("calibration::NcclTests: a short row in the middle of a table is malformed") {
  const std::string text =
      "$ ./all_reduce_perf -g 2\n"
      "#  Rank  0 Group  0 Pid   4100 on    dgx-a07 device  0 [0000:18:00] NVIDIA H100\n"
      "#  Rank  1 Group  0 Pid   4101 on    dgx-a07 device  1 [0000:2a:00] NVIDIA H100\n"
      "#       size         count      type   redop    root     time   algbw   busbw  #wrong     "
      "time   algbw   busbw  #wrong\n"
      "        1024           256     float     sum      -1    10.00\n"
      "        2048           512     float     sum      -1    10.00    0.20    0.20       0    "
      "10.00    0.20    0.20       0\n";
  CHECK_THROWS_WITH_AS(parse_nccl_tests(text, "m.log"),
                       doctest::Contains("m.log:5: results row cut short"), CalibrationError);
}

TEST_CASE("calibration::NcclTests: ranks, groups and sizes beyond their range are malformed") {
  // Found by fuzz_nccl_tests: a rank of 2^32 was converted to int (undefined behaviour).
  const std::string header =
      "#       size         count      type   redop    root     time   algbw   busbw  #wrong\n";
  CHECK_THROWS_WITH_AS(
      parse_nccl_tests("$ ./all_reduce_perf\n#  Rank 42949672960 Pid 4115 on h device 7 [0:d] "
                       "NVIDIA H100\n" +
                           header,
                       "r.log"),
      doctest::Contains("r.log:2: malformed device line"), CalibrationError);
  const std::string device = "#  Rank  0 Group  0 Pid 4100 on h device 0 [0:1] NVIDIA H100\n";
  CHECK_THROWS_WITH_AS(
      parse_nccl_tests("$ ./all_reduce_perf\n" + device + header +
                           "  1e300  1  float  sum  -1  10.0  0.1  0.1  0\n",
                       "s.log"),
      doctest::Contains("s.log:4: size '1e300' is not a whole number of bytes up to 2^53"),
      CalibrationError);
}
