// Clusters that are not uniform: node groups of different GPUs, hosts that hold ranks,
// slowed links.
#include <doctest/doctest.h>

#include <string>

#include "common/error.hpp"
#include "tests/source_path.hpp"
#include "topologies/cluster.hpp"
#include "topologies/cluster_presets.hpp"

using loom::testing::source_path;

using loom::topo::ClusterRequest;
using loom::topo::load_cluster;

TEST_CASE("topologies::ClusterDevices: node groups give each rank its GPU") {
  auto c =
      load_cluster(ClusterRequest{source_path("examples/clusters/h100_a100_mixed.json"), {}, {}});
  CHECK(c.num_gpus() == 16);
  CHECK(c.num_nodes() == 2);
  CHECK(c.num_gpu_types() == 2);
  CHECK(c.gpu_of_rank(0).name == "h100-sxm");
  CHECK(c.gpu_of_rank(7).name == "h100-sxm");
  CHECK(c.gpu_of_rank(8).name == "a100-sxm-80gb");
  CHECK(c.gpu_type_of_rank(15) == 1);
  // Each node keeps its own design: NVLink4 on the H100 node (18 x 25 GB/s), NVLink3 on the
  // A100 node (12 x 25 GB/s).
  CHECK(c.nvlink_bandwidth_Bps(0) == doctest::Approx(450e9));
  CHECK(c.nvlink_bandwidth_Bps(8) == doctest::Approx(300e9));
  // A homogeneous cluster has one type.
  auto h = load_cluster(ClusterRequest{"dgx-h100", 2, {}});
  CHECK(h.num_gpu_types() == 1);
  CHECK(h.gpu_of_rank(15).name == "h100-sxm");
}

TEST_CASE("topologies::ClusterDevices: bad node groups are one-line errors") {
  CHECK_THROWS_WITH_AS(load_cluster(ClusterRequest{
                           source_path("tests/topologies/data/bad_groups_uneven.json"), {}, {}}),
                       doctest::Contains("the same GPUs per node"), loom::ValidationError);
  CHECK_THROWS_WITH_AS(load_cluster(ClusterRequest{
                           source_path("tests/topologies/data/bad_groups_with_node.json"), {}, {}}),
                       doctest::Contains("\"node_groups\" or a single \"node\""),
                       loom::ConfigError);
  CHECK_THROWS_WITH_AS(
      load_cluster(ClusterRequest{source_path("examples/clusters/h100_a100_mixed.json"), 4, {}}),
      doctest::Contains("gives its node groups' sizes"), loom::ValidationError);
}

TEST_CASE("topologies::ClusterDevices: hosts hold the ranks after the GPUs, behind their NICs") {
  ClusterRequest r{"dgx-h100", 1, std::nullopt};
  r.hosts = 2;
  auto c = load_cluster(r);
  CHECK(c.num_gpus() == 8);
  CHECK(c.num_hosts() == 2);
  CHECK(c.vertex(c.host_vertex(1)).name == "host1/cpu0");
  CHECK(c.has_fabric());  // one node, but the hosts need the fabric
  // DGX H100 CPUs: 2 sockets x 8 channels x DDR5-4800 (38.4 GB/s) = 614.4 GB/s.
  CHECK(c.host.memory_bandwidth_Bps == doctest::Approx(614.4e9));
  // GPU 0 to host 0: its NIC (rail 0), leaf 0, the host's NIC (rail 0), PCIe Gen5 to the
  // CPU; the bottleneck is a 400 Gb/s NDR port (50 GB/s). GPU 3 is on rail 3: its route
  // crosses a spine, one leaf-spine link of leaf 3's 50 GB/s uplink spread over 3 spines.
  const auto path = c.route(c.gpu_vertex(0), c.host_vertex(0));
  CHECK(path.bandwidth_Bps == doctest::Approx(50e9));
  CHECK(path.links.size() == 5);  // gpu-pcie, pcie-nic, nic-leaf, leaf-nic, nic-cpu
  CHECK(c.route(c.gpu_vertex(3), c.host_vertex(0)).bandwidth_Bps == doctest::Approx(50e9 / 3));
  CHECK_THROWS_AS(c.host_vertex(2), loom::ValidationError);
  // The file form: count, NICs and memory of its own.
  auto f = load_cluster(ClusterRequest{source_path("examples/clusters/ps_hosts.json"), {}, {}});
  CHECK(f.num_hosts() == 4);
  CHECK(f.host.memory_bandwidth_Bps == doctest::Approx(460.8e9));
  CHECK(f.find_vertex("host3/nic1") >= 0);
  // --hosts overrides the file's count; bad counts are bad input.
  ClusterRequest more{source_path("examples/clusters/ps_hosts.json"), {}, {}};
  more.hosts = 1;
  CHECK(load_cluster(more).num_hosts() == 1);
  more.hosts = -1;
  CHECK_THROWS_WITH_AS(load_cluster(more), doctest::Contains("hosts"), loom::ValidationError);
}

TEST_CASE("topologies::ClusterDevices: slowed links, by hand and seeded") {
  auto c = load_cluster(ClusterRequest{"dgx-h100", 2, {}});
  const auto nic = c.find_vertex("node1/nic0"), leaf = c.find_vertex("leaf0");
  loom::topo::LinkId link = -1;
  for (auto l : c.out_links(nic))
    if (c.link(l).to == leaf) link = l;
  REQUIRE(link >= 0);
  c.slow_link(link, 4);
  CHECK(c.link(link).bandwidth_Bps == doctest::Approx(12.5e9));      // 50 GB/s / 4
  CHECK(c.link(link ^ 1).bandwidth_Bps == doctest::Approx(12.5e9));  // both directions
  CHECK_THROWS_AS(c.slow_link(link, 0.5), loom::ValidationError);
  // Random: the same seed slows the same links by the same factors; fraction 0 none, 1 all.
  auto a = load_cluster(ClusterRequest{"dgx-h100", 4, {}});
  auto b = load_cluster(ClusterRequest{"dgx-h100", 4, {}});
  const auto sa = loom::topo::slow_random_links(a, 0.25, 2.0, 7);
  const auto sb = loom::topo::slow_random_links(b, 0.25, 2.0, 7);
  CHECK(sa == sb);
  CHECK(!sa.empty());
  // Each drawn factor is applied to its link: its bandwidth is the unslowed one over f.
  const auto fresh = load_cluster(ClusterRequest{"dgx-h100", 4, {}});
  for (const auto& [l, f] : sa)
    CHECK(a.link(l).bandwidth_Bps == doctest::Approx(fresh.link(l).bandwidth_Bps / f));
  auto none = load_cluster(ClusterRequest{"dgx-h100", 4, {}});
  CHECK(loom::topo::slow_random_links(none, 0.0, 2.0, 7).empty());
  auto all = load_cluster(ClusterRequest{"dgx-h100", 4, {}});
  // 4 nodes x 8 NIC-leaf links and 8 leaves x spines: every scale-out link touches the
  // fabric; NIC-leaf ones are 32 of them.
  CHECK(loom::topo::slow_random_links(all, 1.0, 2.0, 7).size() >= 32);
}
