#pragma once
// The link-kind catalog: per-direction bandwidth and latency of the interconnects loom knows
// (NVLink 3/4/5 and NVLink-C2C, PCIe Gen3/4/5 per lane, the CPU socket-to-socket link,
// InfiniBand HDR/NDR/XDR, RoCE 100/200/400G), each with its source. Presets and cluster JSON
// files name these types ("nvlink4", "pcie5", "ib-ndr") and may scale them by a lane count.
#include <string>
#include <string_view>
#include <vector>

#include "topologies/cluster.hpp"

namespace loom::topo {

/// One link type. Bandwidth is per lane (PCIe, NVLink) or per port (NICs), per direction.
struct LinkSpec {
  std::string name;  ///< catalog key, e.g. "nvlink4"
  LinkKind kind = LinkKind::NVLINK;
  std::string label;              ///< human label, e.g. "NVLink4"
  double lane_bandwidth_Bps = 0;  ///< bytes per second per lane (or port), one direction
  int default_lanes = 1;          ///< lanes when a link does not say (PCIe: 16)
  double latency_s = 0;           ///< per-hop latency in seconds (wire + switching)
  std::string source;             ///< citation of the figures
};

/// Every link type, in a fixed order.
const std::vector<LinkSpec>& link_catalog();
/// The catalog keys, in catalog order.
std::vector<std::string> link_type_names();
/// Looks up a link type by key; throws ValidationError naming `field` with did-you-mean.
const LinkSpec& find_link_type(std::string_view name, std::string_view field = "link type");

}  // namespace loom::topo
