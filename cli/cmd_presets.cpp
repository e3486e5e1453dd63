#include <fmt/format.h>

#include <iostream>

#include "cli/commands.hpp"
#include "common/document.hpp"
#include "common/error.hpp"
#include "common/table.hpp"
#include "common/units.hpp"
#include "models/model_loader.hpp"
#include "topologies/cluster_presets.hpp"
#include "topologies/gpu_catalog.hpp"

namespace loom::cli {
namespace {

struct PresetsOptions {
  std::string kind;
  std::string format;
};

void add_named(Table& table, OrderedJson& list, const std::vector<PresetInfo>& presets) {
  for (const auto& p : presets) {
    table.add_row({p.name, p.description});
    list.push_back({{"name", p.name}, {"description", p.description}});
  }
}

int run_presets(const PresetsOptions& o) {
  std::vector<std::string> kinds = o.kind.empty()
                                       ? std::vector<std::string>{"models", "clusters", "gpus"}
                                       : std::vector<std::string>{o.kind};
  OrderedJson results;
  std::string text;
  for (const auto& kind : kinds) {
    OrderedJson list = OrderedJson::array();
    if (kind == "gpus") {
      Table table(
          {"gpu", "bf16 dense", "fp8 dense", "memory", "HBM bandwidth", "NVLink/dir", "TDP"});
      for (const auto& g : topo::gpu_catalog()) {
        table.add_row({g.name, format_flop_rate(g.bf16_flops),
                       g.fp8_flops > 0 ? format_flop_rate(g.fp8_flops) : "-",
                       fmt::format("{:.0f} GB ({} usable)", g.hbm_datasheet_bytes / 1e9,
                                   format_bytes(g.hbm_bytes)),
                       format_bandwidth(g.hbm_bandwidth_Bps),
                       g.nvlink_bandwidth_Bps > 0 ? format_bandwidth(g.nvlink_bandwidth_Bps) : "-",
                       fmt::format("{:.0f} W", g.tdp_watts)});
        list.push_back({{"name", g.name},
                        {"display_name", g.display_name},
                        {"bf16_flops", g.bf16_flops},
                        {"fp8_flops", g.fp8_flops},
                        {"hbm_bytes", g.hbm_bytes},
                        {"hbm_datasheet_bytes", g.hbm_datasheet_bytes},
                        {"capacity_source", g.capacity_source},
                        {"hbm_bandwidth_Bps", g.hbm_bandwidth_Bps},
                        {"nvlink_bandwidth_Bps", g.nvlink_bandwidth_Bps},
                        {"tdp_watts", g.tdp_watts},
                        {"source", g.source}});
      }
      text += fmt::format("GPUs (dense peak rates; `--gpu NAME`)\n{}", table.render());
    } else {
      Table table({"name", "description"});
      table.align_left(1);
      if (kind == "models") {
        add_named(table, list, models::model_presets());
        text += fmt::format("Models (`--model NAME`)\n{}", table.render());
      } else {
        add_named(table, list, topo::cluster_presets());
        text +=
            fmt::format("Clusters (`--cluster NAME [--nodes N | --gpus N]`)\n{}", table.render());
      }
    }
    if (&kind != &kinds.back()) text += "\n";
    results[kind] = std::move(list);
  }
  if (parse_format(o.format) == Format::JSON) {
    std::cout << render_document(
        make_document(OrderedJson{{"kind", o.kind.empty() ? "all" : o.kind}}, std::move(results)));
  } else {
    std::cout << text;
  }
  return 0;
}

}  // namespace

Command add_presets_command(CLI::App& root) {
  auto options = std::make_shared<PresetsOptions>();
  Command command;
  command.app = root.add_subcommand("presets", "list the built-in models, clusters and GPUs");
  command.app->add_option("kind", options->kind, "models, clusters or gpus (default: all)")
      ->check(CLI::IsMember({"models", "clusters", "gpus"}));
  add_format_flag(*command.app, options->format, {"table", "json"});
  command.run = [options] { return run_presets(*options); };
  return command;
}

}  // namespace loom::cli
