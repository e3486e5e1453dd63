#include <doctest/doctest.h>

#include <string>

#include "common/error.hpp"
#include "topologies/cluster_presets.hpp"

using loom::topo::ClusterRequest;
using loom::topo::load_cluster;

namespace {
std::string src(const std::string& rel) {
  return std::string(LOOM_SOURCE_DIR) + "/" + rel;
}
}  // namespace

TEST_CASE("topologies::ClusterJson: every example cluster loads") {
  auto custom =
      load_cluster(ClusterRequest{src("examples/clusters/custom_4gpu_roce.json"), {}, {}});
  CHECK(custom.num_gpus() == 8);
  CHECK(custom.num_nodes() == 2);
  CHECK(custom.gpu.hbm_bytes == doctest::Approx(96e9));
  CHECK(custom.nvlink_domain_size(0) == 4);
  // RoCE 400G = 50 GB/s per NIC, 2 NICs for 4 GPUs -> 25 GB/s injection per GPU.
  CHECK(custom.injection_bandwidth_Bps(0) == doctest::Approx(25e9));
  auto resized =
      load_cluster(ClusterRequest{src("examples/clusters/custom_4gpu_roce.json"), {}, 16});
  CHECK(resized.num_nodes() == 4);
  auto pair =
      load_cluster(ClusterRequest{src("examples/clusters/explicit_pcie_pair.json"), {}, {}});
  CHECK(pair.num_gpus() == 2);
  CHECK(pair.route_ranks(0, 1).bandwidth_Bps == doctest::Approx(300e9));  // 12 x 25 GB/s
  auto pod = load_cluster(ClusterRequest{src("examples/clusters/dgx_h100_2to1.json"), {}, {}});
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
  };
  for (auto [file, message] : cases) {
    CAPTURE(file);
    try {
      load_cluster(
          ClusterRequest{src(std::string("tests/topologies/data/") + file + ".json"), {}, {}});
      FAIL("expected an error");
    } catch (const loom::Error& e) {
      CHECK(e.exit_code() == loom::ExitCode::BAD_INPUT);
      CHECK(std::string(e.what()).find(message) != std::string::npos);
      CHECK(std::string(e.what()).find('\n') == std::string::npos);
    }
  }
  CHECK_THROWS_WITH_AS(
      load_cluster(ClusterRequest{src("examples/clusters/explicit_pcie_pair.json"), 2, {}}),
      doctest::Contains("cannot resize"), loom::ValidationError);
}
