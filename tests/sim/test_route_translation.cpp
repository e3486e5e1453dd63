// Fabric::route translates the route between two alike nodes' vertices from the route
// between the same places of two fixed nodes of their class, when that route is forced by the
// link costs (no ECMP choice, topo::Path::fixed): a permutation of alike nodes is an
// automorphism of the cluster. These tests check every translated route against the
// cluster's own routing, on presets with and without ECMP choices and on a cluster whose
// nodes differ (a slowed link).
#include <doctest/doctest.h>

#include <vector>

#include "sim/fabric.hpp"
#include "star_cluster.hpp"
#include "topologies/cluster_presets.hpp"

using namespace loom;
using namespace loom::sim;

namespace {

// Every ordered pair of `vertices` routed by the fabric and by the cluster: the same links.
// Returns how many the fabric translated.
std::size_t check_routes(const topo::Cluster& c, const std::vector<topo::VertexId>& vertices) {
  Fabric fabric(c);
  for (topo::VertexId a : vertices) {
    for (topo::VertexId b : vertices) {
      if (a == b) continue;
      const auto want = c.route(a, b).links;
      const auto got = fabric.links(fabric.route(a, b));
      CAPTURE(c.vertex(a).name);
      CAPTURE(c.vertex(b).name);
      REQUIRE(std::vector<topo::LinkId>(got.begin(), got.end()) == want);
    }
  }
  return fabric.routes_translated();
}

// The GPUs, NICs and CPUs of the cluster's nodes (every device a route starts from).
std::vector<topo::VertexId> endpoints(const topo::Cluster& c) {
  std::vector<topo::VertexId> v;
  for (topo::VertexId i = 0; i < static_cast<topo::VertexId>(c.vertices().size()); ++i) {
    const auto kind = c.vertex(i).kind;
    if (c.vertex(i).node >= 0 && (kind == topo::VertexKind::GPU || kind == topo::VertexKind::NIC ||
                                  kind == topo::VertexKind::CPU))
      v.push_back(i);
  }
  return v;
}

}  // namespace

TEST_CASE("sim::Fabric: translated routes are the cluster's own routes") {
  for (const char* preset : {"dgx-h100", "dgx-a100", "l40s-pcie", "rtx4090-pcie"}) {
    CAPTURE(preset);
    const auto c = topo::load_cluster({preset, 4, std::nullopt});
    const std::size_t translated = check_routes(c, endpoints(c));
    CHECK(translated > 0);
  }
  const auto nvl = topo::load_cluster({"gb200-nvl72", 2, std::nullopt});
  std::vector<topo::VertexId> some;  // a few GPUs of each rack and their NICs (a Grace CPU
                                     // is reached only through its GPUs: no route)
  for (topo::VertexId v : endpoints(nvl))
    if (nvl.vertex(v).local_index % 17 == 0 && nvl.vertex(v).kind != topo::VertexKind::CPU)
      some.push_back(v);
  CHECK(check_routes(nvl, some) > 0);
}

TEST_CASE("sim::Fabric: a node unlike the others is routed by the cluster") {
  auto c = topo::load_cluster({"dgx-h100", 3, std::nullopt});
  // Slow node 1's first NIC cable: node 1 is no longer like node 0.
  sim::testing::slow_first_nic_cable(c, 1);
  CHECK(check_routes(c, endpoints(c)) > 0);  // nodes 0 and 2 are still alike
  Fabric fabric(c);
  CHECK(fabric.compare_nodes(0, 2) == std::nullopt);
  CHECK(fabric.compare_nodes(0, 1).has_value());
  // The same answers from the remembered classes of nodes (asked twice: cached).
  for (int twice = 0; twice < 2; ++twice) {
    CHECK(fabric.nodes_alike(0, 2));
    CHECK(fabric.nodes_alike(2, 0));
    CHECK_FALSE(fabric.nodes_alike(0, 1));
    CHECK_FALSE(fabric.nodes_alike(1, 2));
    CHECK(fabric.nodes_alike(1, 1));
  }
}
