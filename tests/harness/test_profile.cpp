// The harness's profile JSON and nccl-tests table, checked for their own content and for
// what loom makes of them: `loom calibrate show` must read the profile (its extra sections
// included) and `loom calibrate import` the table, with the same times. Inputs are made-up
// results of the shape a harness run gives (test inputs, not measurements).
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "harness/errors.hpp"
#include "harness/nccl_tests_format.hpp"
#include "harness/profile.hpp"
#include "tests/harness/run_loom.hpp"
#include "tests/temp_dir.hpp"

using namespace loom::harness;

namespace {

Timing fixed(double seconds) {
  return summarize({seconds, seconds, seconds});
}

HarnessProfile sample() {
  HarnessProfile p;
  p.device.name = "NVIDIA H100 80GB HBM3";
  p.device.device_count = 2;
  p.device.compute_capability = 90;
  p.device.sm_count = 132;
  p.device.nccl_version = "2.27.7";
  p.date = "2025-01-31T12:00:00Z";
  p.command = "loom-harness nccl -b 1K -e 4K";
  p.gemm.push_back({"bf16", 4096, 4096, 4096, fixed(200e-6), "cublasLt algo 66"});
  p.memory.push_back({"copy", 1 << 30, fixed(400e-6)});
  // cudaMemcpyAsync copies: loom shows them and keeps them out of the kernel model.
  p.memory.push_back({"d2d", 1 << 30, fixed(800e-6)});
  p.memory.push_back({"h2d", 1 << 30, fixed(20e-3)});
  p.memory.push_back({"d2h", 1 << 30, fixed(21e-3)});
  // Two sizes of all_reduce on 2 GPUs, written out of order: the profile sorts them.
  p.collectives.push_back({"all_reduce", 2, 1, 4096, 1024, fixed(12e-6), fixed(10e-6)});
  p.collectives.push_back({"all_reduce", 2, 1, 1024, 256, fixed(9e-6), fixed(11e-6)});
  p.collectives.push_back({"broadcast", 2, 1, 1024, 256, fixed(8e-6), fixed(8e-6)});
  return p;
}

}  // namespace

TEST_CASE("harness::Profile: JSON holds device, gemm, memory and loom collective tables") {
  const auto j = nlohmann::json::parse(profile_to_json(sample()));
  CHECK(j["format"] == "loom-calibration");
  CHECK(j["version"] == 1);
  CHECK(j["device"]["sm_count"] == 132);
  CHECK(j["device"]["compute_capability"] == "9.0");
  CHECK(j["harness"]["date"] == "2025-01-31T12:00:00Z");
  CHECK(j["gemm"][0]["time_us"].get<double>() == doctest::Approx(200));
  // 2 * 4096^3 FLOP in 200 us = 687.2 TFLOP/s
  CHECK(j["gemm"][0]["tflops"].get<double>() == doctest::Approx(687.19).epsilon(1e-4));
  CHECK(j["memory"][0]["gb_per_s"].get<double>() == doctest::Approx(1073741824 / 400e-6 / 1e9));
  REQUIRE(j["collectives"].size() == 2);
  const auto& points = j["collectives"][0]["points"];
  CHECK(j["collectives"][0]["op"] == "all_reduce");
  CHECK(j["collectives"][0]["nodes"] == 1);
  REQUIRE(points.size() == 2);
  CHECK(points[0]["bytes"] == 1024);
  CHECK(points[0]["time_us"].get<double>() == doctest::Approx(10));  // mean of 9 and 11
}

TEST_CASE("harness::Profile: loom calibrate show reads the harness profile") {
  const loom::testing::TempDir dir("harness_profile");
  const std::string path = dir.file("h.json");
  write_profile(sample(), path);
  const auto run = loom::testing::run_loom("calibrate show " + path);
  CHECK(run.status == 0);
  CHECK(run.out.find("all_reduce on 2 ranks over 1 node") != std::string::npos);
  CHECK(run.out.find("broadcast on 2 ranks") != std::string::npos);
  CHECK(run.out.find("\nd2h ") != std::string::npos);
  // The streaming rate comes from the copy kernel (1 GiB in 400 us), not from the memcpys.
  CHECK(run.out.find("stream at 2684.35 GB/s") != std::string::npos);
  CHECK_THROWS_AS(write_profile(sample(), dir.file("missing/h.json")), loom::Error);
}

TEST_CASE("harness::NcclTests: the table follows nccl-tests' layout and bus bandwidth") {
  // Bus-bandwidth factors from nccl-tests' src/*.cu GetBw.
  CHECK(bus_bandwidth_factor("all_reduce", 8) == doctest::Approx(1.75));
  CHECK(bus_bandwidth_factor("all_gather", 8) == doctest::Approx(0.875));
  CHECK(bus_bandwidth_factor("send_recv", 8) == doctest::Approx(1));
  CHECK(nccl_tests_program("all_to_all") == "alltoall_perf");
  CHECK(nccl_tests_program("send_recv") == "sendrecv_perf");
  const HarnessProfile p = sample();
  const std::string text = nccl_tests_report(
      p.collectives, one_host({p.device.name, p.device.name}, "node1"), Options{});
  CHECK(text.find("# Collective test starting: all_reduce_perf") != std::string::npos);
  CHECK(text.find("#  Rank  1 Group  0 Pid      0 on      node1 device  1 [0x00] NVIDIA H100") !=
        std::string::npos);
  // 4096 B in 12 us: algbw 0.34 GB/s, busbw x 2(n-1)/n = 1 -> 0.34
  CHECK(text.find("        4096          1024     float     sum      -1    12.00    0.34    0.34"
                  "     N/A    10.00    0.41    0.41     N/A") != std::string::npos);
}

TEST_CASE("harness::NcclTests: loom calibrate import reads the table back") {
  const loom::testing::TempDir dir("harness_nccl");
  const HarnessProfile p = sample();
  std::ofstream(dir.file("t.txt")) << nccl_tests_report(
      p.collectives, one_host({p.device.name, p.device.name}, "node1"), Options{});
  const auto run = loom::testing::run_loom("calibrate import " + dir.file("t.txt") + " -o " +
                                           dir.file("p.json"));
  REQUIRE(run.status == 0);
  const auto j = nlohmann::json::parse(std::ifstream(dir.file("p.json")));
  REQUIRE(j["collectives"].size() == 2);
  const auto& table = j["collectives"][1];  // loom orders tables by its op enum: broadcast first
  CHECK(table["op"] == "all_reduce");
  CHECK(table["group_size"] == 2);
  CHECK(table["nodes"] == 1);
  CHECK(table["gpu"] == "NVIDIA H100 80GB HBM3");
  CHECK(table["points"][1]["bytes"] == 4096);
  CHECK(table["points"][1]["time_us"].get<double>() == doctest::Approx(11));  // (12 + 10) / 2
}
