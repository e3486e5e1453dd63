// `loom ranks`: where every global rank runs (node, GPU) and every process group of a plan
// (TP, CP, EP, DP, PP in Megatron's layout), with whether each group stays on NVLink. Names
// follow torch.distributed: rank (global), local_rank (on its node), world_size.
#include <fmt/format.h>

#include <iostream>

#include "cli/cluster_flags.hpp"
#include "cli/commands.hpp"
#include "cli/field_flags.hpp"
#include "cli/plan_flags.hpp"
#include "common/csv.hpp"
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
  std::string order = "tp-cp-ep-dp-pp";  // Megatron's default
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
  const Format format = parse_format(o.format);
  if (format == Format::JSON) {
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
    results["world_size"] = world;
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
  std::vector<std::string> headers = {"rank", "local_rank", "node", "GPU"};
  for (Dim d : dims) headers.push_back(strategies::to_string(d));
  std::vector<std::vector<int>> coord;
  for (Dim d : dims) coord.push_back(layout.coordinates(d));
  std::vector<std::vector<std::string>> rows;
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> row = {std::to_string(r), std::to_string(cluster.local_rank(r)),
                                    std::to_string(cluster.node_of_rank(r)),
                                    cluster.vertex(cluster.gpu_vertex(r)).name};
    for (size_t i = 0; i < dims.size(); ++i)
      row.push_back(std::to_string(coord[i][static_cast<size_t>(r)]));
    rows.push_back(std::move(row));
  }
  if (format == Format::CSV) {
    headers[3] = "gpu";
    CsvTable csv("ranks", 1, headers);
    for (auto& row : rows) csv.add_row(std::move(row));
    std::cout << csv.render();
    return 0;
  }
  std::string out =
      fmt::format("cluster {}: world_size {}; plan tp {} cp {} ep {} dp {} pp {}; order {}\n\n",
                  cluster.name, world, plan.tp, plan.cp, plan.ep, plan.dp, plan.pp, layout.order());
  Table t(headers);
  t.align_left(3);
  for (auto& row : rows) t.add_row(std::move(row));
  out += t.render();
  out +=
      "\n(rank: global rank, torch.distributed's RANK; local_rank: the GPU's index on its node, "
      "LOCAL_RANK;\n tp..pp: the rank's index in each group)\n\n";
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
  add_order_flag(*app, options->order);
  add_format_flag(*app, options->format, {"table", "json", "csv"});
  Command command;
  command.app = app;
  command.run = [options]() { return run_ranks(*options); };
  return command;
}

}  // namespace loom::cli
