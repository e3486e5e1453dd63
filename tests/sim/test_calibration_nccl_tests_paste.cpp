// The nccl-tests importer on logs as people paste them, built here in the layout nccl-tests'
// src/util.cu prints: launcher prefixes, no command line (the op inferred from the columns),
// --op, environment variables, several tables, outliers, mixed dtypes, an overlong line, and
// time linear in the log's length.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <ctime>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "sim/calibration/nccl_tests.hpp"
#include "sim/calibration/nccl_tests_fit.hpp"
#include "sim/calibration/profile.hpp"

using namespace loom;
using namespace loom::calibration;
using Op = sim::CollectiveOp;

namespace {

struct LogSpec {
  std::string before;  // lines before the run (command line, exports)
  std::string prefix;  // before every line of the run (a launcher's label)
  int ranks = 8;
  int per_node = 8;
  std::string type = "float";
  std::string redop = "sum";
  int root = -1;
  double factor = 1.75;                     // busbw/algbw: 2(n-1)/n of all_reduce on 8 ranks
  std::vector<std::array<double, 3>> rows;  // bytes, out-of-place us, in-place us
};

// Sizes 1 KiB .. 1 GiB, factor 2, at 20 us + 100 GB/s.
std::vector<std::array<double, 3>> smooth_rows() {
  std::vector<std::array<double, 3>> rows;
  for (double bytes = 1024; bytes <= 1073741824.0; bytes *= 2) {
    const double us = 20 + bytes / 1e5;
    rows.push_back({bytes, us, us * 1.01});
  }
  return rows;
}

std::string row_text(const LogSpec& s, const std::array<double, 3>& r) {
  const double bytes = r[0], oop = r[1], ip = r[2];  // not a binding: the lambda captures it
  const auto series = [&](double us) {
    const double algbw = bytes / us / 1e3;
    return fmt::format("  {:7.2f}  {:6.2f}  {:6.2f}  {:6}", us, algbw, algbw * s.factor, 0);
  };
  return fmt::format("{:12.0f}  {:12.0f}  {:>8}  {:>6}  {:6}{}{}", bytes, bytes / 4, s.type,
                     s.redop, s.root, series(oop), series(ip));
}

std::string make_log(const LogSpec& s) {
  std::vector<std::string> lines = {
      "# nThread 1 nGpus 1 minBytes 1024 maxBytes 1073741824 step: 2(factor) warmup iters: 5 "
      "iters: 20 agg iters: 1 validation: 1 graph: 0",
      "#", "# Using devices"};
  for (int r = 0; r < s.ranks; ++r) {
    lines.push_back(
        fmt::format("#  Rank {:2} Group  0 Pid {:6} on {:>10} device {:2} "
                    "[0000:{:02x}:00] NVIDIA H100 80GB HBM3",
                    r, 1000 + r, fmt::format("node{}", r / s.per_node), r % s.per_node, r));
  }
  lines.push_back("#");
  lines.push_back(
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
      "time   algbw   busbw #wrong");
  lines.push_back(
      "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            "
      "(us)  (GB/s)  (GB/s)");
  for (const auto& r : s.rows.empty() ? smooth_rows() : s.rows) lines.push_back(row_text(s, r));
  lines.push_back("# Out of bounds values : 0 OK");
  lines.push_back("# Avg bus bandwidth    : 1.0");
  std::string out = s.before;
  for (const auto& l : lines) out += s.prefix + l + "\n";
  return out;
}

bool has_note(const ImportResult& r, const std::string& text) {
  return std::any_of(r.notes.begin(), r.notes.end(),
                     [&](const std::string& n) { return n.find(text) != std::string::npos; });
}

// Header line of make_log's table: after `before`, 3 lines and the device lines.
int header_line(const LogSpec& s) {
  return static_cast<int>(std::count(s.before.begin(), s.before.end(), '\n')) + 3 + s.ranks + 2;
}

}  // namespace

TEST_CASE("calibration::NcclTestsPaste: mpirun --tag-output and pdsh prefixes are stripped") {
  for (const std::string prefix : {"[1,0]<stdout>:", "[1,0]<stdout>: ", "gpu-node-3: "}) {
    LogSpec s;
    s.before = prefix + "$ mpirun -np 16 ./build/all_gather_perf -b 1K -e 1G\n";
    s.prefix = prefix;
    s.ranks = 16;
    s.factor = 15.0 / 16;
    s.redop = "none";
    const ImportResult r = parse_nccl_tests(make_log(s), "p.log");
    REQUIRE(r.tables.size() == 1);
    CHECK(r.tables[0].op == Op::ALL_GATHER);
    CHECK(r.tables[0].group_size == 16);
    CHECK(r.tables[0].nodes == 2);
    CHECK(r.tables[0].points.size() == 21);
  }
}

TEST_CASE("calibration::NcclTestsPaste: without a program the columns tell the op") {
  // nccl-tests src/*.cu: redop "none" for all_gather, alltoall, broadcast, gather, scatter;
  // a root for broadcast, reduce, gather, scatter; busbw = algbw x 2(n-1)/n (all_reduce),
  // (n-1)/n (all_gather, reduce_scatter, alltoall, gather, scatter), 1 (broadcast, reduce,
  // sendrecv).
  struct Case {
    Op op;
    const char* redop;
    int root;
    const char* evidence;
  };
  const Case cases[] = {
      {Op::ALL_REDUCE, "sum", -1, "busbw/algbw 1.75 = 2(n-1)/n with n=8, redop sum, root -1"},
      {Op::REDUCE_SCATTER, "sum", -1, "busbw/algbw 0.875 = (n-1)/n with n=8, redop sum, root -1"},
      {Op::SEND_RECV, "sum", -1, "busbw/algbw 1 = 1 with n=8, redop sum, root -1"},
      {Op::BROADCAST, "none", 0, "busbw/algbw 1 = 1 with n=8, redop none, root 0"},
      {Op::REDUCE, "max", 3, "busbw/algbw 1 = 1 with n=8, redop max, root 3"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.evidence);
    LogSpec s;
    s.redop = c.redop;
    s.root = c.root;
    s.factor = sim::bus_bandwidth_factor(c.op, 8);
    const ImportResult r = parse_nccl_tests(make_log(s), "i.log");
    REQUIRE(r.tables.size() == 1);
    CHECK(r.tables[0].op == c.op);
    CHECK(r.tables[0].op_inferred_from == c.evidence);
    CHECK(has_note(r, fmt::format("i.log:{}: the log names no '<op>_perf' program; {} inferred",
                                  header_line(s), sim::to_string(c.op))));
  }
}

TEST_CASE("calibration::NcclTestsPaste: what nccl-tests prints alike needs --op") {
  LogSpec s;  // all_gather and alltoall: redop none, root -1, (n-1)/n
  s.redop = "none";
  s.factor = 7.0 / 8;
  const std::string text = make_log(s);
  CHECK_THROWS_WITH_AS(
      parse_nccl_tests(text, "a.log"),
      doctest::Contains(fmt::format("a.log:{}: the log names no '<op>_perf' program and "
                                    "nccl-tests prints all_gather and all_to_all alike",
                                    header_line(s))
                            .c_str()),
      CalibrationError);
  CHECK_THROWS_WITH_AS(parse_nccl_tests(text, "a.log"),
                       doctest::Contains("state which with --op all_gather or --op all_to_all"),
                       CalibrationError);
  ImportOptions stated;
  stated.op = Op::ALL_TO_ALL;
  const ImportResult r = parse_nccl_tests(text, "a.log", stated);
  REQUIRE(r.tables.size() == 1);
  CHECK(r.tables[0].op == Op::ALL_TO_ALL);
  CHECK(r.tables[0].op_inferred_from.empty());
  CHECK(r.notes.empty());
  s.root = 0;  // gather and scatter: redop none, a root, (n-1)/n
  CHECK_THROWS_WITH_AS(parse_nccl_tests(make_log(s), "g.log"),
                       doctest::Contains("prints scatter and gather alike"), CalibrationError);
  // --op against columns that fit another op: taken, with a note.
  stated.op = Op::ALL_REDUCE;
  const ImportResult odd = parse_nccl_tests(text, "a.log", stated);
  CHECK(odd.tables[0].op == Op::ALL_REDUCE);
  CHECK(has_note(odd, "--op all_reduce stated, though the table's columns fit all_gather"));
}

TEST_CASE("calibration::NcclTestsPaste: --op contradicting the program is refused") {
  LogSpec s;
  s.before = "$ ./build/all_reduce_perf_mpi -b 1K -e 1G\n";
  ImportOptions stated;
  stated.op = Op::ALL_GATHER;
  CHECK_THROWS_WITH_AS(parse_nccl_tests(make_log(s), "c.log", stated),
                       doctest::Contains(fmt::format("c.log:{}: --op all_gather contradicts the "
                                                     "program 'all_reduce_perf_mpi'",
                                                     header_line(s))
                                             .c_str()),
                       CalibrationError);
  stated.op = Op::ALL_REDUCE;  // agreeing is fine
  CHECK(parse_nccl_tests(make_log(s), "c.log", stated).tables[0].program == "all_reduce_perf_mpi");
}

TEST_CASE("calibration::NcclTestsPaste: the environment a log shows, and forced choices") {
  LogSpec s;
  s.before =
      "$ export NCCL_ALGO=Ring\n"
      "$ srun --export=ALL,NCCL_NVLS_ENABLE=0 true\n"
      "$ NCCL_PROTO=Simple NCCL_MIN_CTAS=4 NCCL_MAX_CTAS=\"8\" ./all_reduce_perf -d bfloat16\n"
      "node1:1:1 [0] NCCL INFO NCCL_IB_QPS_PER_CONNECTION set by environment to 4.\n";
  s.type = "bfloat16";
  const ImportResult r = parse_nccl_tests(make_log(s), "e.log");
  REQUIRE(r.tables.size() == 1);
  const CollectiveTable& t = r.tables[0];
  CHECK(t.dtype == "bfloat16");
  CHECK(t.env.at("NCCL_ALGO") == "Ring");
  CHECK(t.env.at("NCCL_NVLS_ENABLE") == "0");
  CHECK(t.env.at("NCCL_PROTO") == "Simple");
  CHECK(t.env.at("NCCL_MIN_CTAS") == "4");
  CHECK(t.env.at("NCCL_MAX_CTAS") == "8");
  CHECK(t.env.at("NCCL_IB_QPS_PER_CONNECTION") == "4");
  CHECK(t.forced_algo == "Ring");
  CHECK(t.forced_proto == "Simple");
  CHECK(has_note(r,
                 "the log sets NCCL_ALGO=Ring NCCL_PROTO=Simple; the table is recorded as "
                 "forced"));
  // A later command line replaces the earlier one's variables; exports stay.
  const ImportResult two = parse_nccl_tests(
      make_log(s) + make_log(LogSpec{.before = "$ NCCL_PROTO=LL ./all_reduce_perf\n"}), "e.log");
  REQUIRE(two.tables.size() == 2);
  CHECK(two.tables[1].forced_algo == "Ring");
  CHECK(two.tables[1].forced_proto == "LL");
  CHECK(two.tables[1].env.count("NCCL_MIN_CTAS") == 0);
}

TEST_CASE("calibration::NcclTestsPaste: several tables in one file keep their own ops") {
  LogSpec gather;
  gather.before = "$ ./all_gather_perf -b 1K -e 1G\n";
  gather.redop = "none";
  gather.factor = 7.0 / 8;
  LogSpec scatter;
  scatter.before = "$ ./reduce_scatter_perf -b 1K -e 1G\nOpen MPI noise between runs\n";
  scatter.factor = 7.0 / 8;
  LogSpec inferred;  // no command line of its own: the last program named still holds
  inferred.ranks = 4;
  inferred.factor = 3.0 / 4;
  const ImportResult r =
      parse_nccl_tests(make_log(gather) + make_log(scatter) + make_log(inferred), "m.log");
  REQUIRE(r.tables.size() == 3);
  CHECK(r.tables[0].op == Op::ALL_GATHER);
  CHECK(r.tables[1].op == Op::REDUCE_SCATTER);
  CHECK(r.tables[2].op == Op::REDUCE_SCATTER);
  CHECK(r.tables[2].group_size == 4);
}

TEST_CASE("calibration::NcclTestsPaste: a row 4x slower than its neighbours is down-weighted") {
  LogSpec s;
  s.before = "$ ./all_reduce_perf -b 1K -e 1G\n";
  s.rows = smooth_rows();
  const size_t bad = 10;  // 1 MiB: both times 4x
  s.rows[bad][1] *= 4;
  s.rows[bad][2] *= 4;
  const size_t half = 14;  // 16 MiB: the out-of-place time alone 4x
  s.rows[half][1] *= 4;
  const ImportResult r = parse_nccl_tests(make_log(s), "o.log");
  REQUIRE(r.tables.size() == 1);
  const CollectiveTable& t = r.tables[0];
  const int first_row = header_line(s) + 2;
  const CollectivePoint& p = t.points[bad];
  CHECK(p.out_of_place_outlier);
  CHECK(p.in_place_outlier);
  CHECK(p.weight == 0);
  CHECK(*p.out_of_place_seconds == doctest::Approx(s.rows[bad][1] * 1e-6).epsilon(1e-3));
  CHECK(has_note(r, fmt::format("o.log:{}: out-of-place time", first_row + bad)));
  CHECK(has_note(r, fmt::format("o.log:{}: in-place time", first_row + bad)));
  const CollectivePoint& q = t.points[half];
  CHECK(q.out_of_place_outlier);
  CHECK_FALSE(q.in_place_outlier);
  CHECK(q.weight == 0.5);
  CHECK(q.seconds == doctest::Approx(s.rows[half][2] * 1e-6).epsilon(1e-3));  // in-place only
  int flagged = 0;
  for (const auto& point : t.points) flagged += point.out_of_place_outlier + point.in_place_outlier;
  CHECK(flagged == 3);  // the neighbours are not blamed
  // Interpolation skips the bad row: time never falls as size grows.
  double before = 0;
  for (double bytes = 1024; bytes <= 1073741824.0; bytes *= 1.1) {
    const double seconds = interpolate(t, bytes).value();
    CHECK(seconds >= before);
    before = seconds;
  }
  // At the bad row's size: the power law between its neighbours, as if it were not there.
  CHECK(interpolate(t, s.rows[bad][0]).value() ==
        doctest::Approx(std::sqrt(t.points[bad - 1].seconds * t.points[bad + 1].seconds)));
}

TEST_CASE("calibration::NcclTestsPaste: rows of another dtype are skipped with a note") {
  LogSpec s;
  s.before = "$ ./all_reduce_perf -d all\n";
  std::string text = make_log(s);
  LogSpec half = s;
  half.type = "half";
  const std::string rows_half = row_text(half, {1024, 30, 30}) + "\n";
  text.insert(text.find("# Out of bounds"), rows_half);
  const ImportResult r = parse_nccl_tests(text, "d.log");
  REQUIRE(r.tables.size() == 1);
  CHECK(r.tables[0].dtype == "float");
  CHECK(r.tables[0].points.size() == 21);
  CHECK(has_note(r,
                 "skipped 1 rows of another type/redop/root than the table's first (float "
                 "sum -1)"));
}

TEST_CASE("calibration::NcclTestsPaste: a line past the limit is refused by name") {
  LogSpec s;
  s.before = "$ ./all_reduce_perf\n";
  std::string text = make_log(s);
  std::string huge;
  while (huge.size() <= MAX_NCCL_TESTS_LINE_BYTES) huge += "1 ";
  text += huge + "\n";
  const int line = static_cast<int>(std::count(text.begin(), text.end(), '\n'));
  CHECK_THROWS_WITH_AS(
      parse_nccl_tests(text, "l.log"),
      doctest::Contains(fmt::format("l.log:{}: line of {} bytes; loom reads nccl-tests lines of "
                                    "up to {} bytes (MAX_NCCL_TESTS_LINE_BYTES)",
                                    line, huge.size(), MAX_NCCL_TESTS_LINE_BYTES)
                            .c_str()),
      CalibrationError);
}

TEST_CASE("calibration::NcclTestsPaste: import time is linear in the log's length") {
  // A table of `rows` rows: distinct sizes, each measured twice (-N 2), as a generator would
  // print them. Twice the rows must take at most 2.5x the time (a quadratic scan takes 4x).
  const auto log_of = [](int rows) {
    LogSpec s;
    s.before = "$ ./all_reduce_perf -N 2\n";
    for (int repeat = 0; repeat < 2; ++repeat) {
      for (int i = 1; i <= rows / 2; ++i) {
        const double bytes = 1073741824.0 + 1024.0 * i;  // rows of one length at any count
        const double us = 20 + bytes / 1e5;  // in-place 1% off either way: run-to-run noise
        s.rows.push_back({bytes, us, us * (1 + 0.01 * (i % 3 - 1))});
      }
    }
    return make_log(s);
  };
  // Processor time, not wall time, of the best of several runs, the two sizes taking turns:
  // other work on the machine then slows both alike.
  const auto seconds = [](const std::string& text, size_t points) {
    const std::clock_t start = std::clock();
    const ImportResult r = parse_nccl_tests(text, "big.log");
    const double took = static_cast<double>(std::clock() - start) / CLOCKS_PER_SEC;
    REQUIRE(r.tables[0].points.size() == points);
    return took;
  };
  const int rows = 5000;
  const std::string small = log_of(rows), large = log_of(2 * rows);
  // A busy machine can slow one side of a comparison: up to three tries; a quadratic import
  // (4x) fails every one.
  double one = 0, two = 0;
  for (int attempt = 0; attempt < 3 && !(two > 0 && two <= 2.5 * one); ++attempt) {
    one = two = 1e9;
    for (int run = 0; run < 15; ++run) {
      one = std::min(one, seconds(small, rows / 2));
      two = std::min(two, seconds(large, rows));
    }
  }
  CAPTURE(one);
  CAPTURE(two);
  CHECK(two <= 2.5 * one);
}

TEST_CASE("calibration::NcclTestsPaste: the profile keeps what the import found") {
  LogSpec s;
  s.before = "$ NCCL_ALGO=Tree ./all_reduce_perf -d half\n";
  s.type = "half";
  s.rows = smooth_rows();
  s.rows[10][1] *= 4;  // an out-of-place outlier
  LogSpec bare;        // no program: inferred
  bare.ranks = 16;
  bare.per_node = 8;
  bare.factor = 2.0 * 15 / 16;
  Profile profile;
  add_table(profile, parse_nccl_tests(make_log(s), "k.log").tables.at(0));
  add_table(profile, parse_nccl_tests(make_log(bare), "b.log").tables.at(0));
  const Profile back = parse_profile(profile_to_json(profile), "p.json");
  REQUIRE(back.collectives.size() == 2);
  const CollectiveTable& t = back.collectives[0];
  CHECK(t.dtype == "half");
  CHECK(t.env.at("NCCL_ALGO") == "Tree");
  CHECK(t.forced_algo == "Tree");
  CHECK(t.forced_proto.empty());
  CHECK(t.points[10].out_of_place_outlier);
  CHECK(t.points[10].weight == 0.5);
  CHECK(t.points[9].weight == 1);
  CHECK(back.collectives[1].op_inferred_from ==
        "busbw/algbw 1.875 = 2(n-1)/n with n=16, redop sum, root -1");
  CHECK(profile_to_json(back) == profile_to_json(profile));
}

TEST_CASE("calibration::NcclTestsPaste: an Open MPI warning block between rows is noise") {
  LogSpec s;
  s.before = "$ mpirun -np 8 ./all_reduce_perf -b 1K -e 1G\n";
  std::string text = make_log(s);
  const std::string block =
      "--------------------------------------------------------------------------\n"
      "WARNING: Could not generate an xpmem segment id for this process'\n"
      "address space.\n"
      "\n"
      "  Local host: node0\n"
      "  Error code: 2 (No such file or directory)\n"
      "--------------------------------------------------------------------------\n"
      "[node0:29250] 7 more processes have sent help message help-btl-vader.txt\n";
  const size_t row = text.find("\n     1048576 ") + 1;
  text.insert(row, block);
  const ImportResult r = parse_nccl_tests(text, "w.log");
  REQUIRE(r.tables.size() == 1);
  CHECK(r.tables[0].points.size() == 21);
  CHECK(r.notes.empty());
}
