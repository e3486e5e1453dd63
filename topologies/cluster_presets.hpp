#pragma once
// Cluster presets and the cluster loader: a preset name ("dgx-h100") or a cluster JSON file,
// scaled to N nodes or N GPUs. Multi-node clusters get a rail-optimised
// two-tier fat-tree: NIC i of every node on the leaf of rail i, every leaf on every spine.
// The JSON format is documented in docs/clusters.md.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "common/limits.hpp"
#include "common/preset_info.hpp"
#include "topologies/cluster.hpp"

namespace loom::topo {

/// Most hosts (CPU servers holding ranks) a cluster may add.
inline constexpr int MAX_CLUSTER_HOSTS = 4096;

/// What the user asked for: a preset name or a path to a cluster JSON, and its size.
struct ClusterRequest {
  std::string spec;          ///< preset name or path to a cluster JSON file
  std::optional<int> nodes;  ///< number of nodes (default: 1, or the file's "nodes")
  std::optional<int> gpus;   ///< number of GPUs; must be a multiple of the GPUs per node
  std::optional<int> hosts =
      std::nullopt;  ///< hosts holding ranks (parameter servers); default: the file's, 0
};

/// Builds the cluster (routing index finalized). Throws ValidationError on an unknown preset
/// (with did-you-mean), a bad or inconsistent size or one above MAX_CLUSTER_NODES,
/// MAX_CLUSTER_GPUS, MAX_TOPOLOGY_VERTICES or MAX_TOPOLOGY_LINKS (common/limits.hpp: a
/// 65,536-node DGX H100 cluster takes 16 s and 1.5 GB to build; beyond the limits a typo
/// would exhaust memory), hosts outside 0..MAX_CLUSTER_HOSTS; ConfigError on a bad JSON file; and
/// ValidationError when the resulting graph is disconnected. Messages name the request's
/// fields ("cluster", "nodes", "gpus") as `names` spells them.
Cluster load_cluster(const ClusterRequest& request, const FieldNames& names = {});
/// The presets `loom presets clusters` lists, in a fixed order.
std::vector<PresetInfo> cluster_presets();
/// The first preset (in that order) whose nodes hold GPU catalog key `gpu`, e.g. "dgx-h100"
/// for "h100-sxm"; nullopt when no preset has that GPU.
std::optional<std::string> cluster_preset_for_gpu(std::string_view gpu);
/// The preset names, in the same order.
std::vector<std::string> cluster_preset_names();
/// Whether a cluster spec names a cluster JSON file rather than a preset: it holds a '/' or
/// ends in ".json".
bool looks_like_path(std::string_view spec);

}  // namespace loom::topo
