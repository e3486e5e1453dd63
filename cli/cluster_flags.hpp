#pragma once
// The cluster flags shared by topo, ranks, memory, collective and simulate: --cluster C
// (preset name or cluster JSON), --nodes N, --gpus N, --hosts N; and their resolution into a
// cluster.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "topologies/cluster.hpp"

namespace loom::cli {

/// Raw values of --cluster, --nodes and --gpus.
struct ClusterFlags {
  std::string cluster;       ///< preset name or path to a cluster JSON
  std::optional<int> nodes;  ///< --nodes N
  std::optional<int> gpus;   ///< --gpus N (a multiple of the GPUs per node)
  std::optional<int> hosts;  ///< --hosts N (CPU servers holding ranks, e.g. parameter servers)
};

/// Adds --cluster, --nodes, --gpus and --hosts to `app`. With `required`, --cluster must be given.
void add_cluster_flags(CLI::App& app, ClusterFlags& flags, bool required = true);

/// Loads the cluster the flags name (topo::load_cluster). Throws ValidationError (unknown
/// preset, bad size) or ConfigError (bad cluster file).
topo::Cluster resolve_cluster(const ClusterFlags& flags);

/// The GPU count the flags will give, known without building the cluster: --gpus, or a
/// preset's GPUs per node (one node built) x --nodes (default 1). nullopt for a cluster file,
/// with --hosts, or when the flags are bad (resolve_cluster then reports them). Lets a command
/// check the plan before a large cluster is built (a 65,536-node graph takes seconds).
std::optional<std::int64_t> planned_gpus(const ClusterFlags& flags);

}  // namespace loom::cli
