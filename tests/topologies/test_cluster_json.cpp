#include <doctest/doctest.h>

#include <string>

#include "common/error.hpp"
#include "tests/source_path.hpp"
#include "topologies/cluster_presets.hpp"

using loom::testing::source_path;

using loom::topo::ClusterRequest;
using loom::topo::load_cluster;

TEST_CASE("topologies::ClusterJson: every example cluster loads") {
  auto custom =
      load_cluster(ClusterRequest{source_path("examples/clusters/custom_4gpu_roce.json"), {}, {}});
  CHECK(custom.num_gpus() == 8);
  CHECK(custom.num_nodes() == 2);
  CHECK(custom.gpu.hbm_bytes == doctest::Approx(96e9));
  CHECK(custom.nvlink_domain_size(0) == 4);
  // RoCE 400G = 50 GB/s per NIC, 2 NICs for 4 GPUs -> 25 GB/s injection per GPU.
  CHECK(custom.injection_bandwidth_Bps(0) == doctest::Approx(25e9));
  auto resized =
      load_cluster(ClusterRequest{source_path("examples/clusters/custom_4gpu_roce.json"), {}, 16});
  CHECK(resized.num_nodes() == 4);
  auto pair = load_cluster(
      ClusterRequest{source_path("examples/clusters/explicit_pcie_pair.json"), {}, {}});
  CHECK(pair.num_gpus() == 2);
  CHECK(pair.route_ranks(0, 1).bandwidth_Bps == doctest::Approx(300e9));  // 12 x 25 GB/s
  auto pod =
      load_cluster(ClusterRequest{source_path("examples/clusters/dgx_h100_2to1.json"), {}, {}});
  CHECK(pod.num_nodes() == 32);
  CHECK(pod.oversubscription == 2);
}

TEST_CASE("topologies::ClusterJson: bad files are one-line errors, exit code 2") {
  const std::pair<const char*, const char*> cases[] = {
      {"bad_missing_unit", "'300' has no unit"},
      {"bad_undefined_vertex", "/links/3/b: invalid value 'cpu1'"},
      {"bad_disconnected", "vertex 'cpu1' is not connected"},
      {"bad_zero_bandwidth", "/links/1/bandwidth: invalid value \"0GBps\""},
      {"bad_unknown_key", "did you mean 'lanes'?"},
      // Used to double the pair's bandwidth silently.
      {"bad_duplicate_link", "/links/4/b: invalid value 'gpu1' (a second gpu0 - gpu1 link)"},
      // Used to report "2 GPUs on 6 nodes (0 per node)".
      {"bad_node_gap", "(node 1 has 0 GPUs, node 0 has 1)"},
      // Used to run out of memory (10^8 nodes) or loop for minutes (10^8 spines).
      {"bad_huge_nodes", "/nodes: invalid value 100000000; allowed: an integer from 1 to 65536"},
      {"bad_huge_spines", "/fabric/spines: invalid value 100000000"},
      // 2^32 + 1 lanes used to wrap to 1 lane (25 GB/s) when narrowed to int.
      {"bad_lanes_wrap", "/node/links/0/lanes: invalid value 4294967297"},
  };
  for (const auto& one : cases) {
    const auto file = one.first;  // named: clang 14 cannot capture a binding
    const auto message = one.second;
    CAPTURE(file);
    try {
      load_cluster(ClusterRequest{
          source_path(std::string("tests/topologies/data/") + file + ".json"), {}, {}});
      FAIL("expected an error");
    } catch (const loom::Error& e) {
      CHECK(e.exit_code() == loom::ExitCode::BAD_INPUT);
      CHECK(std::string(e.what()).find(message) != std::string::npos);
      CHECK(std::string(e.what()).find('\n') == std::string::npos);
    }
  }
  CHECK_THROWS_WITH_AS(
      load_cluster(ClusterRequest{source_path("examples/clusters/explicit_pcie_pair.json"), 2, {}}),
      doctest::Contains("cannot resize"), loom::ValidationError);
}

TEST_CASE("topologies::Cluster: sizes beyond MAX_CLUSTER_NODES / MAX_CLUSTER_GPUS are bad input") {
  CHECK_THROWS_WITH_AS(load_cluster(ClusterRequest{"dgx-h100", 65537, {}}),
                       "nodes: invalid value '65537'; allowed: at most 65536",
                       loom::ValidationError);
  // 8,000 GB200 NVL72 racks = 576,000 GPUs > 2^19.
  CHECK_THROWS_WITH_AS(load_cluster(ClusterRequest{"gb200-nvl72", 8000, {}}),
                       doctest::Contains("576000 GPUs exceed loom's maximum of 524288"),
                       loom::ValidationError);
  CHECK_THROWS_WITH_AS(load_cluster(ClusterRequest{"dgx-h100", {}, 1 << 20}),
                       doctest::Contains("gpus: invalid value '1048576'"), loom::ValidationError);
}

TEST_CASE("topologies::Cluster: size errors name the request's fields as the caller spells them") {
  // Plain keys by default; a caller's FieldNames respells every mention.
  CHECK_THROWS_WITH_AS(load_cluster(ClusterRequest{"dgx-h100", {}, 12}),
                       "gpus 12 is not a multiple of the 8 GPUs per node of 'dgx-h100'; use a "
                       "multiple or nodes",
                       loom::ValidationError);
  const loom::FieldNames upper([](std::string_view key) { return "<" + std::string(key) + ">"; });
  CHECK_THROWS_WITH_AS(load_cluster(ClusterRequest{"dgx-h100", 1, 16}, upper),
                       "<gpus> 16 means 2 nodes of 8 GPUs, but <nodes> is 1; give one of them",
                       loom::ValidationError);
}
