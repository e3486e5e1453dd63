#include "cli/cluster_flags.hpp"

#include "cli/field_flags.hpp"
#include "topologies/cluster_presets.hpp"

namespace loom::cli {

void add_cluster_flags(CLI::App& app, ClusterFlags& flags, bool required) {
  auto* opt = app.add_option("--cluster", flags.cluster,
                             "cluster preset (see `loom presets clusters`) or cluster JSON file");
  if (required) opt->required();
  app.add_option("--nodes", flags.nodes, "number of nodes (default 1)");
  app.add_option("--gpus", flags.gpus, "number of GPUs (a multiple of the GPUs per node)");
  app.add_option("--hosts", flags.hosts,
                 "CPU server hosts on the fabric that hold ranks (parameter servers)");
}

topo::Cluster resolve_cluster(const ClusterFlags& flags) {
  return topo::load_cluster(
      topo::ClusterRequest{flags.cluster, flags.nodes, flags.gpus, flags.hosts}, flag_names());
}

std::optional<std::int64_t> planned_gpus(const ClusterFlags& flags) {
  if (flags.gpus) return *flags.gpus > 0 ? std::optional<std::int64_t>(*flags.gpus) : std::nullopt;
  if ((flags.hosts && *flags.hosts > 0) || topo::looks_like_path(flags.cluster))
    return std::nullopt;
  const int nodes = flags.nodes.value_or(1);
  if (nodes < 1 || nodes > MAX_CLUSTER_NODES) return std::nullopt;
  try {
    const topo::Cluster one =
        topo::load_cluster(topo::ClusterRequest{flags.cluster, 1, std::nullopt});
    return static_cast<std::int64_t>(one.num_gpus()) * nodes;
  } catch (const Error&) {
    return std::nullopt;  // resolve_cluster reports it
  }
}

}  // namespace loom::cli
