#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "common/error.hpp"
#include "tests/source_path.hpp"
#include "topologies/cluster.hpp"
#include "topologies/cluster_presets.hpp"

using loom::testing::source_path;

using loom::topo::Cluster;
using loom::topo::ClusterRequest;
using loom::topo::LinkKind;
using loom::topo::load_cluster;
using loom::topo::Path;
using loom::topo::VertexKind;

namespace {
std::vector<VertexKind> vertex_kinds(const Cluster& c, const Path& p) {
  std::vector<VertexKind> out;
  if (p.links.empty()) return out;
  out.push_back(c.vertex(c.link(p.links.front()).from).kind);
  for (auto l : p.links) out.push_back(c.vertex(c.link(l).to).kind);
  return out;
}
}  // namespace

TEST_CASE("topologies::Cluster: DGX H100 GPU 0 -> GPU 7 crosses the NVSwitch at 450 GB/s") {
  Cluster c = load_cluster(ClusterRequest{"dgx-h100", {}, {}});
  CHECK(c.num_gpus() == 8);
  CHECK(c.num_nodes() == 1);
  CHECK(c.gpu.name == "h100-sxm");
  Path p = c.route_ranks(0, 7);
  // NVIDIA H100 whitepaper: 18 NVLink4 links x 25 GB/s per direction = 450 GB/s per GPU.
  CHECK(vertex_kinds(c, p) ==
        std::vector<VertexKind>{VertexKind::GPU, VertexKind::NVSWITCH, VertexKind::GPU});
  CHECK(p.bandwidth_Bps == doctest::Approx(450e9));
  CHECK(p.latency_s == doctest::Approx(0.6e-6).scale(0));   // 2 NVLink hops x 0.3 us
  CHECK(c.vertex(c.link(p.links[0]).to).in_switch_reduce);  // NVLS on H100's NVSwitch
  CHECK(c.nvlink_domain_size(0) == 8);
  CHECK(c.nvlink_bandwidth_Bps(3) == doctest::Approx(450e9));
}

TEST_CASE("topologies::Cluster: DGX H100 rank 0 -> rank 8 stays on rail 0 at the NIC's 400 Gb/s") {
  Cluster c = load_cluster(ClusterRequest{"dgx-h100", 2, {}});
  CHECK(c.num_gpus() == 16);
  CHECK(c.node_of_rank(8) == 1);
  CHECK(c.local_rank(8) == 0);
  Path p = c.route_ranks(0, 8);
  CHECK(vertex_kinds(c, p) == std::vector<VertexKind>{VertexKind::GPU, VertexKind::PCIE_SWITCH,
                                                      VertexKind::NIC, VertexKind::LEAF,
                                                      VertexKind::NIC, VertexKind::PCIE_SWITCH,
                                                      VertexKind::GPU});
  CHECK(c.vertex(c.link(p.links[2]).to).name == "leaf0");
  CHECK(c.vertex(c.link(p.links[1]).to).name == "node0/nic0");
  // ConnectX-7: 400 Gb/s = 50 GB/s per direction; PCIe Gen5 x16 is 63 GB/s, so the NIC binds.
  CHECK(p.bandwidth_Bps == doctest::Approx(50e9));
  CHECK(c.link(p.links[2]).kind == LinkKind::INFINIBAND);
  // NCCL hwLat NET ring LL: 2.7 us = 4 PCIe hops x 0.5 + 2 IB hops x 0.35.
  CHECK(p.latency_s == doctest::Approx(2.7e-6).scale(0));
  CHECK(c.nvlink_domain(8) == 1);
  CHECK(c.injection_bandwidth_Bps(0) == doctest::Approx(50e9));
}

TEST_CASE("topologies::Cluster: another rail crosses a spine (no PXN modelled)") {
  Cluster c = load_cluster(ClusterRequest{"dgx-h100", 2, {}});
  Path p = c.route_ranks(0, 9);
  auto kinds = vertex_kinds(c, p);
  CHECK(kinds == std::vector<VertexKind>{VertexKind::GPU, VertexKind::PCIE_SWITCH, VertexKind::NIC,
                                         VertexKind::LEAF, VertexKind::SPINE, VertexKind::LEAF,
                                         VertexKind::NIC, VertexKind::PCIE_SWITCH,
                                         VertexKind::GPU});
  CHECK(p.bandwidth_Bps == doctest::Approx(50e9));
}

TEST_CASE("topologies::Cluster: routing is deterministic and symmetric in length") {
  Cluster a = load_cluster(ClusterRequest{"dgx-h100", 4, {}});
  Cluster b = load_cluster(ClusterRequest{"dgx-h100", {}, 32});
  for (int r = 0; r < 32; r += 5) {
    CHECK(a.route_ranks(r, 31 - r).links == b.route_ranks(r, 31 - r).links);
    CHECK(a.route_ranks(r, 31 - r).links.size() == a.route_ranks(31 - r, r).links.size());
  }
}

TEST_CASE("topologies::Cluster: bisection of a 32-node rail-optimised fat-tree, 1:1 and 2:1") {
  // 32 DGX H100 nodes, 8 rails of ConnectX-7 NDR (400 Gb/s = 50 GB/s per direction).
  // Halving by rails (rails 0-3 vs 4-7) forces all traffic through the spines:
  //   1:1 -> each leaf has 32 x 50 GB/s of uplink; 4 leaves x 1,600 GB/s = 6,400 GB/s
  //          (= 256 NICs / 2 x 50 GB/s, the non-blocking value);
  //   2:1 -> each leaf has 32 x 50 / 2 = 800 GB/s of uplink; 4 x 800 = 3,200 GB/s.
  // Halving by nodes costs 8 leaves x 16 down-links x 50 GB/s = 6,400 GB/s either way.
  Cluster one = load_cluster(ClusterRequest{"dgx-h100", 32, {}});
  CHECK(one.bisection_bandwidth_Bps() == doctest::Approx(6400e9));
  Cluster two =
      load_cluster(ClusterRequest{source_path("examples/clusters/dgx_h100_2to1.json"), 32, {}});
  CHECK(two.oversubscription == 2);
  CHECK(two.bisection_bandwidth_Bps() == doctest::Approx(3200e9));
  // Single DGX H100: halves of 4 GPUs each, 4 x 450 GB/s through the NVSwitch plus the PCIe
  // path through the CPUs (the 4 PCIe uplinks of a socket carry 4 x 63 GB/s, capped by the
  // socket link 4 x 32 GB/s = 128 GB/s): 1,800 + 128 = 1,928 GB/s.
  Cluster node = load_cluster(ClusterRequest{"dgx-h100", {}, {}});
  CHECK(node.bisection_bandwidth_Bps() == doctest::Approx(1928e9));
}

TEST_CASE("topologies::Cluster: presets build and are connected") {
  for (const auto& p : loom::topo::cluster_presets()) {
    CAPTURE(p.name);
    Cluster c = load_cluster(ClusterRequest{p.name, 2, {}});
    CHECK(c.num_nodes() == 2);
    CHECK(c.num_gpus() > 0);
    CHECK(c.route_ranks(0, c.num_gpus() - 1).bandwidth_Bps > 0);
  }
  CHECK(load_cluster(ClusterRequest{"gb200-nvl72", {}, {}}).nvlink_domain_size(71) == 72);
  Cluster pairs = load_cluster(ClusterRequest{"a100-pcie-pairs", {}, {}});
  CHECK(pairs.nvlink_domain_size(0) == 2);
  CHECK(pairs.num_nvlink_domains() == 4);
  CHECK(pairs.route_ranks(0, 1).links.size() == 1);  // over the bridge
  Cluster rtx = load_cluster(ClusterRequest{"rtx4090-pcie", {}, {}});
  CHECK(rtx.nvlink_domain_size(0) == 1);
  // GPU 0 -> GPU 4: root complex, socket link, root complex (no P2P, no switch).
  CHECK(rtx.route_ranks(0, 4).links.size() == 3);
}

TEST_CASE("topologies::Cluster: each GPU's default preset holds that GPU") {
  using loom::topo::cluster_preset_for_gpu;
  CHECK(cluster_preset_for_gpu("h100-sxm") == "dgx-h100");
  CHECK(cluster_preset_for_gpu("h200") == "hgx-h200");
  CHECK(cluster_preset_for_gpu("b200") == "dgx-b200");
  CHECK(cluster_preset_for_gpu("gb200") == "gb200-nvl72");
  CHECK_FALSE(cluster_preset_for_gpu("mi300x").has_value());
  for (const auto& p : loom::topo::cluster_presets()) {
    CAPTURE(p.name);
    const Cluster c = load_cluster(ClusterRequest{p.name, 1, {}});
    CHECK(cluster_preset_for_gpu(c.gpu.name).has_value());
  }
}

TEST_CASE("topologies::Cluster: bad requests are one-line errors") {
  CHECK_THROWS_WITH_AS(load_cluster(ClusterRequest{"dgx-h10", {}, {}}),
                       doctest::Contains("did you mean 'dgx-h100'"), loom::ValidationError);
  CHECK_THROWS_WITH_AS(load_cluster(ClusterRequest{"dgx-h100", {}, 12}),
                       doctest::Contains("not a multiple of the 8 GPUs per node"),
                       loom::ValidationError);
  CHECK_THROWS_AS(load_cluster(ClusterRequest{"dgx-h100", 0, {}}), loom::ValidationError);
  CHECK_THROWS_AS(load_cluster(ClusterRequest{"dgx-h100", 2, 8}), loom::ValidationError);
}

TEST_CASE("topologies::Cluster: preset link figures match the vendors' published numbers") {
  // Per GPU per direction = the datasheet's bidirectional figure / 2; NIC ports per direction.
  struct Expect {
    const char* preset;
    double nvlink_Bps;  // GPU -> NVSwitch (or bridge)
    double nic_Bps;     // one NIC port, rank 0 -> first rank of node 1 (same rail)
    int domain;         // GPUs in one NVLink domain
  };
  const Expect cases[] = {
      // DGX A100 user guide: NVLink3 600 GB/s bidirectional per GPU through NVSwitch
      // (300 GB/s/dir); 8x ConnectX-6 HDR InfiniBand 200 Gb/s = 25 GB/s per port.
      {"dgx-a100", 300e9, 25e9, 8},
      // DGX H100 user guide: NVLink4 900 GB/s bidirectional (450 GB/s/dir); 8x ConnectX-7
      // NDR 400 Gb/s = 50 GB/s per port.
      {"dgx-h100", 450e9, 50e9, 8},
      // GB200 NVL72 product page: 1.8 TB/s bidirectional NVLink5 per GPU (900 GB/s/dir), one
      // 72-GPU NVLink domain; ConnectX-7 NDR 400 Gb/s per GPU.
      {"gb200-nvl72", 900e9, 50e9, 72},
      // DGX B200 datasheet: NVLink5 1.8 TB/s bidirectional per GPU (900 GB/s/dir); 8x
      // ConnectX-7 NDR 400 Gb/s = 50 GB/s per port.
      {"dgx-b200", 900e9, 50e9, 8},
      // DGX B300 / GB300 NVL72: NVLink5 900 GB/s/dir; ConnectX-8 XDR 800 Gb/s = 100 GB/s per
      // GPU, on PCIe Gen6 (118 GB/s x16), so the NIC is the bottleneck.
      {"dgx-b300", 900e9, 100e9, 8},
      {"gb300-nvl72", 900e9, 100e9, 72},
  };
  for (const Expect& e : cases) {
    CAPTURE(e.preset);
    Cluster c = load_cluster(ClusterRequest{e.preset, 2, {}});
    CHECK(c.nvlink_bandwidth_Bps(0) == doctest::Approx(e.nvlink_Bps));
    CHECK(c.nvlink_domain_size(0) == e.domain);
    CHECK(c.route_ranks(0, 1).bandwidth_Bps == doctest::Approx(e.nvlink_Bps));
    CHECK(c.route_ranks(0, e.domain).bandwidth_Bps == doctest::Approx(e.nic_Bps));
  }
}
