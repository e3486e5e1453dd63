// `loom ranks`: where every global rank runs (node, GPU) and every process group of a plan
// (TP, CP, EP, DP, PP in Megatron's layout), with whether each group stays on NVLink.
#include <fmt/format.h>

#include <iostream>

#include "cli/cluster_flags.hpp"
#include "cli/commands.hpp"
#include "cli/field_flags.hpp"
#include "cli/plan_flags.hpp"
#include "common/document.hpp"
#include "common/error.hpp"
#include "common/strings.hpp"
#include "common/table.hpp"
#include "strategies/rank_layout.hpp"

namespace loom::cli {
namespace {

struct RanksOptions {
  ClusterFlags cluster;
  PlanFlags plan;
  std::string order = "tp-cp-ep-dp-pp";
  std::string format;
};

std::string group_text(const std::vector<int>& g) {
  std::vector<std::string> parts;
  for (int r : g) parts.push_back(std::to_string(r));
  return "[" + join(parts, ",") + "]";
}

int run_ranks(const RanksOptions& o) {
  const topo::Cluster cluster = resolve_cluster(o.cluster);
  const models::TrainingPlan plan = resolve_plan(o.plan, cluster.num_gpus()).plan;
  const strategies::RankLayout layout(plan, o.order, flag_names());
  using strategies::Dim;
  std::vector<Dim> dims = {Dim::TP, Dim::CP, Dim::EP, Dim::DP, Dim::PP};
  if (plan.ep > 1) dims.push_back(Dim::EDP);
  const int world = layout.world_size();
  if (parse_format(o.format) == Format::JSON) {
    OrderedJson ranks = OrderedJson::array();
    for (int r = 0; r < world; ++r) {
      ranks.push_back({{"rank", r},
                       {"node", cluster.node_of_rank(r)},
                       {"local_rank", cluster.local_rank(r)},
                       {"gpu", cluster.vertex(cluster.gpu_vertex(r)).name}});
    }
    OrderedJson groups = OrderedJson::object();
    OrderedJson nvlink = OrderedJson::object();
    for (Dim d : dims) {
      groups[strategies::to_string(d)] = layout.groups(d);
      nvlink[strategies::to_string(d)] = layout.on_nvlink(d, cluster);
    }
    OrderedJson results;
    results["order"] = layout.order();
    results["ranks"] = ranks;
    results["groups"] = groups;
    results["on_nvlink"] = nvlink;
    OrderedJson context;
    context["cluster"] = cluster.name;
    context["plan"] = {
        {"tp", plan.tp}, {"pp", plan.pp}, {"dp", plan.dp}, {"cp", plan.cp}, {"ep", plan.ep}};
    std::cout << render_document(make_document(context, results));
    return 0;
  }
  std::string out =
      fmt::format("cluster {}: {} GPUs; plan tp {} cp {} ep {} dp {} pp {}; order {}\n\n",
                  cluster.name, world, plan.tp, plan.cp, plan.ep, plan.dp, plan.pp, layout.order());
  std::vector<std::string> headers = {"process id", "rank", "node", "GPU"};
  for (Dim d : dims) headers.push_back(strategies::to_string(d));
  Table t(headers);
  t.align_left(3);
  // Coordinates by group membership: one pass per dimension.
  std::vector<std::vector<int>> coord(dims.size(), std::vector<int>(static_cast<size_t>(world)));
  for (size_t i = 0; i < dims.size(); ++i)
    for (const auto& g : layout.groups(dims[i]))
      for (size_t k = 0; k < g.size(); ++k)
        coord[i][static_cast<size_t>(g[k])] = static_cast<int>(k);
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> row = {std::to_string(r), std::to_string(cluster.local_rank(r)),
                                    std::to_string(cluster.node_of_rank(r)),
                                    cluster.vertex(cluster.gpu_vertex(r)).name};
    for (size_t i = 0; i < dims.size(); ++i)
      row.push_back(std::to_string(coord[i][static_cast<size_t>(r)]));
    t.add_row(row);
  }
  out += t.render();
  out += "\n(rank: local rank on the node; tp..pp: the process's index in each group)\n\n";
  for (Dim d : dims) {
    const auto groups = layout.groups(d);
    std::vector<std::string> parts;
    for (const auto& g : groups) parts.push_back(group_text(g));
    out += fmt::format(
        "{} groups ({} of size {}, {}): {}\n", strategies::to_string(d), groups.size(),
        layout.size(d),
        layout.on_nvlink(d, cluster) ? "inside NVLink domains" : "crossing NVLink domains",
        join(parts, " "));
  }
  std::cout << out;
  return 0;
}

}  // namespace

Command add_ranks_command(CLI::App& root) {
  auto options = std::make_shared<RanksOptions>();
  CLI::App* app = root.add_subcommand(
      "ranks", "global rank -> node and GPU, and every process group (tp, cp, ep, dp, pp)");
  add_cluster_flags(*app, options->cluster, true);
  add_plan_flags(*app, options->plan);
  app->add_option("--order", options->order,
                  "layout order, fastest first (Megatron's default tp-cp-ep-dp-pp)")
      ->capture_default_str();
  add_format_flag(*app, options->format, {"table", "json"});
  Command command;
  command.app = app;
  command.run = [options]() { return run_ranks(*options); };
  return command;
}

}  // namespace loom::cli
