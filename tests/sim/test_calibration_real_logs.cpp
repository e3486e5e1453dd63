// The nccl-tests importer on real logs, byte-identical to what people posted in public GitHub
// issues (tests/sim/calibration_data/real_logs/README.md cites each source): imported
// unedited, with the op inferred where the log has no command line. Line numbers below are
// the files' own.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "sim/calibration/nccl_tests.hpp"
#include "tests/source_path.hpp"

using loom::testing::source_path;

using namespace loom;
using namespace loom::calibration;

namespace {

std::string real_log(const char* name) {
  return source_path("tests/sim/calibration_data/real_logs/") + name;
}

bool has_note(const ImportResult& r, const std::string& text) {
  return std::any_of(r.notes.begin(), r.notes.end(),
                     [&](const std::string& n) { return n.find(text) != std::string::npos; });
}

int outliers(const CollectiveTable& t) {
  return static_cast<int>(std::count_if(t.points.begin(), t.points.end(), [](const auto& p) {
    return p.out_of_place_outlier || p.in_place_outlier;
  }));
}

}  // namespace

TEST_CASE("calibration::RealLogs: one node without a command line: the op is inferred") {
  const std::string file = real_log("nccl-tests_all_reduce_h100_8gpu_1node.log");
  const ImportResult r = import_files({file});
  REQUIRE(r.tables.size() == 1);
  const CollectiveTable& t = r.tables[0];
  CHECK(t.op == sim::CollectiveOp::ALL_REDUCE);
  CHECK(t.program.empty());
  // busbw/algbw = 473.60/270.63 (line 21) = 1.75 = 2(8-1)/8.
  CHECK(t.op_inferred_from == "busbw/algbw 1.75 = 2(n-1)/n with n=8, redop sum, root -1");
  CHECK(has_note(r, file + ":14: the log names no '<op>_perf' program; all_reduce inferred"));
  CHECK(t.group_size == 8);
  CHECK(t.nodes == 1);
  CHECK(t.gpu == "NVIDIA H100 80GB HBM3");
  CHECK(t.dtype == "float");
  CHECK(t.env.empty());
  REQUIRE(t.points.size() == 6);  // 128 MiB .. 4 GiB, factor 2
  // Line 21: 4294967296 B, out-of-place 15870 us, in-place 15773 us.
  CHECK(t.points.back().bytes == 4294967296.0);
  CHECK(*t.points.back().out_of_place_seconds == doctest::Approx(15870e-6));
  CHECK(*t.points.back().in_place_seconds == doctest::Approx(15773e-6));
  CHECK(t.points.back().source == file + ":21");
  CHECK(outliers(t) == 0);
}

TEST_CASE("calibration::RealLogs: srun's ' 0: ' prefix is stripped from every line") {
  const std::string file = real_log("nccl-tests_all_reduce_h100_16gpu_2node_srun-prefixed.log");
  const ImportResult r = import_files({file});
  REQUIRE(r.tables.size() == 1);
  const CollectiveTable& t = r.tables[0];
  CHECK(t.op == sim::CollectiveOp::ALL_REDUCE);
  CHECK(t.op_inferred_from == "busbw/algbw 1.875 = 2(n-1)/n with n=16, redop sum, root -1");
  CHECK(t.group_size == 16);
  CHECK(t.nodes == 2);  // node005, node007 (lines 4-19)
  CHECK(t.gpu == "NVIDIA H100 80GB HBM3");
  REQUIRE(t.points.size() == 11);  // 8 MiB .. 8 GiB; "#wrong" N/A (validation 0)
  // Line 24: " 0:      8388608 ... 215.3 ... 180.0".
  CHECK(t.points.front().bytes == 8388608.0);
  CHECK(*t.points.front().out_of_place_seconds == doctest::Approx(215.3e-6));
  CHECK(*t.points.front().in_place_seconds == doctest::Approx(180.0e-6));
  CHECK(t.points.front().source == file + ":24");
  // Line 34: 8589934592 B, 103530 / 103538 us.
  CHECK(t.points.back().seconds == doctest::Approx(0.5 * (103530e-6 + 103538e-6)));
  CHECK(outliers(t) == 0);
}

TEST_CASE("calibration::RealLogs: a wrapped mpirun line gives the program and its -x variables") {
  const std::string file = real_log("nccl-tests_all_reduce_h100_16gpu_2node.log");
  const ImportResult r = import_files({file});
  REQUIRE(r.tables.size() == 1);
  const CollectiveTable& t = r.tables[0];
  // Line 9 of the backslash-continued command: $HOME/nccl-tests/build/all_reduce_perf_mpi.
  CHECK(t.op == sim::CollectiveOp::ALL_REDUCE);
  CHECK(t.program == "all_reduce_perf_mpi");
  CHECK(t.op_inferred_from.empty());
  CHECK(t.group_size == 16);
  CHECK(t.nodes == 2);
  CHECK(t.env.at("NCCL_DEBUG") == "VERSION");            // line 2
  CHECK(t.env.at("NCCL_SOCKET_IFNAME") == "enp27s0f0");  // line 3
  CHECK(t.env.at("NCCL_P2P_LEVEL") == "NVL");            // line 5
  CHECK(t.env.at("NCCL_IB_HCA") ==                       // line 7, commas kept
        "mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1");
  CHECK(t.env.size() == 7);
  CHECK(t.forced_algo.empty());  // NCCL chose its algorithm
  // The Open MPI warning block (lines 10-19) and help lines (lines 23-24) are noise.
  REQUIRE(t.points.size() == 32);                 // 8 B .. 16 GiB
  CHECK(t.points.back().bytes == 17179869184.0);  // line 77: 68652 / 68668 us
  CHECK(t.points.back().seconds == doctest::Approx(0.5 * (68652e-6 + 68668e-6)));
  // Line 51: 256 B out-of-place 94.40 us, 3.7x its neighbours (25.68, 32.35); in-place 25.90.
  const CollectivePoint& bad = t.points[5];
  CHECK(bad.bytes == 256);
  CHECK(bad.out_of_place_outlier);
  CHECK_FALSE(bad.in_place_outlier);
  CHECK(bad.weight == 0.5);
  CHECK(*bad.out_of_place_seconds == doctest::Approx(94.40e-6));  // kept as measured
  CHECK(bad.seconds == doctest::Approx(25.90e-6));                // not averaged in
  CHECK(has_note(r, file + ":51: out-of-place time 94.4 us at 256 B breaks"));
  // Line 46: the first row's out-of-place 68.52 us (warm-up) against 24.96 at 16 B.
  CHECK(t.points[0].out_of_place_outlier);
  // Line 52: 512 B out-of-place 32.35 us against in-place 26.31 and its trend (~26.5).
  CHECK(t.points[6].out_of_place_outlier);
  CHECK(outliers(t) == 3);
}

TEST_CASE("calibration::RealLogs: a log from its '# nThread' line on, trailing blanks kept") {
  const std::string file = real_log("nccl-tests_all_reduce_h100_16gpu_2node_gcp-a3mega.log");
  const ImportResult r = import_files({file});
  REQUIRE(r.tables.size() == 1);
  const CollectiveTable& t = r.tables[0];
  CHECK(t.op == sim::CollectiveOp::ALL_REDUCE);
  CHECK(t.op_inferred_from == "busbw/algbw 1.875 = 2(n-1)/n with n=16, redop sum, root -1");
  CHECK(has_note(r, file + ":22: the log names no '<op>_perf' program"));
  CHECK(t.group_size == 16);
  CHECK(t.nodes == 2);             // ztan-mig-235z, ztan-mig-gq73
  REQUIRE(t.points.size() == 31);  // 8 B .. 8 GiB
  // Line 54: 8589934592 B, 47535 / 47743 us.
  CHECK(*t.points.back().out_of_place_seconds == doctest::Approx(47535e-6));
  CHECK(*t.points.back().in_place_seconds == doctest::Approx(47743e-6));
  // Line 44: 8388608 B, 571.9 / 563.5 us.
  CHECK(t.points[20].bytes == 8388608);
  CHECK(t.points[20].seconds == doctest::Approx(0.5 * (571.9e-6 + 563.5e-6)));
}

TEST_CASE("calibration::RealLogs: 32 ranks on 4 hosts; the 2 MiB out-of-place dip is flagged") {
  const std::string file = real_log("nccl-tests_all_reduce_h100_32gpu_4node_vm.log");
  const ImportResult r = import_files({file});
  REQUIRE(r.tables.size() == 1);
  const CollectiveTable& t = r.tables[0];
  CHECK(t.program == "all_reduce_perf_mpi");
  CHECK(t.group_size == 32);
  CHECK(t.nodes == 4);                                              // pt01, spt01, spt02, pt02
  CHECK(t.env.at("NCCL_TOPO_FILE") == "/mnt/nfs/vm_topo_mod.xml");  // line 1, one line
  CHECK(t.env.at("NCCL_SOCKET_IFNAME") == "ens33");
  REQUIRE(t.points.size() == 32);
  // Line 61: 2097152 B out-of-place 191.3 us (busbw 21.24 below the 1 MiB row's 24.73);
  // in-place 132.2 us follows the trend.
  const CollectivePoint& dip = t.points[18];
  CHECK(dip.bytes == 2097152);
  CHECK(dip.out_of_place_outlier);
  CHECK_FALSE(dip.in_place_outlier);
  CHECK(dip.seconds == doctest::Approx(132.2e-6));
  CHECK(has_note(r, file + ":61: out-of-place time 191.3 us at 2097152 B"));
  // Its neighbours are not blamed for it (lines 60 and 62).
  CHECK_FALSE(t.points[17].out_of_place_outlier);
  CHECK_FALSE(t.points[19].out_of_place_outlier);
  // Interpolated time grows with size across the dip.
  double before = 0;
  for (double bytes = 1048576; bytes <= 8388608; bytes *= 1.25) {
    const double s = interpolate(t, bytes).value();
    CHECK(s >= before);
    before = s;
  }
}
