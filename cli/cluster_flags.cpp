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

}  // namespace loom::cli
