// `loom search`: the fastest plans for a model on a cluster. Every plan over the dimensions
// the flags leave free is validated and estimated by the fast tier; the best are simulated
// exactly and ranked by simulated step time (strategies/search/, docs/search.md). The output
// is the same, byte for byte, for any --threads.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <string_view>
#include <thread>

#include "cli/band_output.hpp"
#include "cli/cluster_flags.hpp"
#include "cli/cmd_calibrate_network.hpp"
#include "cli/commands.hpp"
#include "cli/plan_flags.hpp"
#include "cli/plan_label.hpp"
#include "cli/plan_text.hpp"
#include "cli/progress.hpp"
#include "cli/search_shards.hpp"
#include "common/csv.hpp"
#include "common/document.hpp"
#include "common/error.hpp"
#include "common/strings.hpp"
#include "common/table.hpp"
#include "common/units.hpp"
#include "models/model_loader.hpp"
#include "strategies/plan/plan_json.hpp"
#include "strategies/search/search.hpp"

namespace loom::cli {
namespace {

struct SearchFlags {
  std::string model;
  ClusterFlags cluster;
  PlanFlags plan;
  int top = 10;
  int threads = 0;  // 0: the hardware's
  int exact = 0;
  int sample = 0;
  std::string network = "flow";
  std::string format;
  ShardFlags shards;
  std::string calibration;  // profile with a fitted network; empty: loom's defaults
};

// The search dimensions in which two plans differ: "zero 1 vs 0, mbs 1 vs 2".
std::vector<std::string> differences(const models::TrainingPlan& a, const models::TrainingPlan& b) {
  std::vector<std::string> out;
  const auto cmp = [&](const char* name, auto x, auto y) {
    if (x != y) out.push_back(fmt::format("{} {} vs {}", name, x, y));
  };
  const auto onoff = [](bool v) { return v ? "on" : "off"; };
  cmp("tp", a.tp, b.tp);
  cmp("pp", a.pp, b.pp);
  cmp("dp", a.dp, b.dp);
  cmp("cp", a.cp, b.cp);
  cmp("ep", a.ep, b.ep);
  cmp("schedule", schedule_text(a), schedule_text(b));
  cmp("mbs", a.mbs, b.mbs);
  cmp("zero", a.zero, b.zero);
  cmp("recompute", models::to_string(a.recompute), models::to_string(b.recompute));
  cmp("sp", onoff(a.sp), onoff(b.sp));
  cmp("overlap-grad-reduce", onoff(a.overlap_grad_reduce), onoff(b.overlap_grad_reduce));
  cmp("overlap-param-gather", onoff(a.overlap_param_gather), onoff(b.overlap_param_gather));
  cmp("tp-comm-overlap", onoff(a.tp_comm_overlap), onoff(b.tp_comm_overlap));
  cmp("overlap-moe-expert-parallel-comm", onoff(a.overlap_moe_expert_parallel_comm),
      onoff(b.overlap_moe_expert_parallel_comm));
  return out;
}

// Each ranked plan's error bands; a plan whose step time lies within #1's step-time band is
// statistically tied with it: loom's own error on runs like #1 cannot order them.
struct RankedBands {
  std::vector<PlanBands> bands;  ///< one per ranked plan
  double tie_limit_s = 0;        ///< #1's band's upper edge, seconds
  bool tied(size_t i, const strategies::SearchResult& r) const {
    return i > 0 && r.ranked[i].report.step_time_s <= tie_limit_s;
  }
};

RankedBands ranked_bands(const models::ModelSpec& model, const topo::Cluster& cluster,
                         const strategies::SearchResult& r) {
  RankedBands out;
  for (const auto& c : r.ranked)
    out.bands.push_back(plan_bands(model, c.plan, cluster.gpu.arch, cluster.num_gpus()));
  if (!r.ranked.empty())
    out.tie_limit_s = out.bands[0].time.of_time(r.ranked[0].report.step_time_s).second;
  return out;
}

std::string band_range(std::pair<double, double> edges) {
  return fmt::format("{}-{}", format_time(edges.first), format_time(edges.second));
}

std::string rho_text(double rho) {
  return std::isnan(rho) ? "n/a" : fmt::format("{:.3f}", rho);
}

// "why #1 beats #2: ..." (empty with a single plan).
std::string why_line(const strategies::SearchResult& r) {
  if (r.ranked.size() < 2) return "";
  const auto& w = r.ranked[0];
  const auto& u = r.ranked[1];
  const auto diff = differences(w.plan, u.plan);
  const std::string differ =
      diff.empty() ? "" : fmt::format("; the plans differ in {}", join(diff, ", "));
  const double gap = u.report.step_time_s - w.report.step_time_s;
  if (gap <= 0) {
    const double wm = w.report.memory.peak_bytes, um = u.report.memory.peak_bytes;
    return fmt::format(
        "why #1 is ahead of #2: the same simulated step time; {}{}\n",
        wm < um ? fmt::format("#1 needs less memory ({} vs {})", format_bytes(wm), format_bytes(um))
                : std::string("#1 comes first in the search order"),
        differ);
  }
  const auto d = strategies::largest_difference(w.report, u.report);
  return fmt::format(
      "why #1 beats #2: {} faster per step ({}); the largest difference is {}, {} vs {}{}\n",
      format_time(gap), format_percent(gap / u.report.step_time_s), d.part, format_time(d.first_s),
      format_time(d.second_s), differ);
}

std::string render_table(const models::ModelSpec& model, const topo::Cluster& cluster,
                         const strategies::SearchSpace& space, const strategies::SearchResult& r,
                         const SearchFlags& f) {
  const auto& t = r.tally;
  const models::TrainingPlan& any = r.ranked.front().plan;
  std::string out =
      fmt::format("model {} on {} ({} x {}), network {}; gbs {} seq {} {} {}\n", model.name,
                  cluster.name, cluster.num_gpus(), cluster.gpu.name, f.network, any.global_batch(),
                  any.seq, models::to_string(any.precision), models::to_string(any.optimizer));
  out += fmt::format("search space: {}\n", space.describe());
  out += fmt::format("plans: {} enumerated, {} invalid, {} out of memory ({} per GPU), {} fit\n",
                     format_grouped(t.enumerated), format_grouped(t.invalid),
                     format_grouped(t.out_of_memory), format_bytes(cluster.gpu.hbm_bytes),
                     format_grouped(t.fitting));
  if (!t.invalid_by_field.empty()) {
    out += "invalid by the field whose rule they break:\n";
    size_t width = 16;  // the field column fits the longest name
    for (const auto& entry : t.invalid_by_field) width = std::max(width, entry.first.size());
    for (const auto& [field, c] : t.invalid_by_field)
      out += fmt::format("  {:<{}} {:>14}  e.g. {}\n", field, width, format_grouped(c.count),
                         c.example);
  }
  out += fmt::format(
      "fast tier ranked the {} fitting plans; the best {} re-simulated by the step simulator\n\n",
      format_grouped(t.fitting), r.ranked.size());
  Table table({"rank", "plan", "step time", "80% band", "tied", "MFU", "peak memory", "bubble",
               "exposed comm", "fast tier"});
  table.align_left(1);
  const size_t shown = std::min(r.ranked.size(), static_cast<size_t>(f.top));
  const RankedBands rb = ranked_bands(model, cluster, r);
  for (size_t i = 0; i < shown; ++i) {
    const auto& c = r.ranked[i];
    table.add_row({std::to_string(i + 1), plan_label(c.plan), format_time(c.report.step_time_s),
                   band_range(rb.bands[i].time.of_time(c.report.step_time_s)),
                   i == 0 ? "-" : (rb.tied(i, r) ? "yes" : "no"), format_percent(c.report.mfu),
                   format_bytes(c.report.memory.peak_bytes), format_time(c.report.bubble_time_s),
                   format_time(c.report.exposed_comm_time_s),
                   fmt::format("{} (#{})", format_time(c.fast_step_s), c.fast_rank)});
  }
  out += table.render();
  out += fmt::format("{}\n", PLAN_LABEL_LEGEND);
  if (!r.ranked.empty()) {
    const auto& b = rb.bands[0].time;
    out += fmt::format(
        "tied: statistically tied with #1, its step time within #1's 80% band ({}); {}\n",
        b.extrapolation ? "no published run within this regime: extrapolation"
                        : fmt::format("from {} published runs like it: {}", b.runs, b.label),
        "loom's own error on such runs cannot order them");
  }
  out += why_line(r);
  if (r.failed > 0) {
    out += fmt::format(
        "note: the step simulator could not run {} of the re-simulated plans "
        "(left out); candidate {}: {}\n",
        r.failed, r.first_failed_id, r.first_failure);
  }
  out += fmt::format(
      "exact tier: the fast tier's best {} re-simulated; {}\n", r.resimulated,
      r.winner_stable
          ? fmt::format("the winner (fast #{}) is stable: none of the {} re-simulated after it "
                        "beat it, and the fast estimates of the rest, divided by the largest "
                        "fast/simulated ratio seen ({:.3f}), are slower than its time",
                        r.ranked.empty() ? 0 : r.ranked.front().fast_rank,
                        r.resimulated - (r.ranked.empty() ? 0 : r.ranked.front().fast_rank),
                        1 + r.stable_margin)
          : fmt::format("stopped at the cap before the winner (fast #{}) was stable: a plan "
                        "further down the fast ranking may be faster (raise --exact)",
                        r.ranked.empty() ? 0 : r.ranked.front().fast_rank));
  out += fmt::format(
      "rank agreement (Spearman rho, fast tier vs step simulator): {} over the {} "
      "re-simulated plans",
      rho_text(r.rho_resimulated), r.ranked.size());
  if (!r.sample_times.empty())
    out += fmt::format("; {} over a sample of {} fitting plans", rho_text(r.rho_sample),
                       r.sample_times.size());
  out += "\n";
  return out;
}

OrderedJson nullable(double x) {
  return std::isnan(x) ? OrderedJson(nullptr) : OrderedJson(x);
}

OrderedJson render_results(const strategies::SearchSpace& space, const strategies::SearchResult& r,
                           double capacity, int top, const RankedBands& rb) {
  const auto& t = r.tally;
  OrderedJson res;
  OrderedJson counts;
  counts["enumerated"] = t.enumerated;
  counts["invalid"] = t.invalid;
  counts["out_of_memory"] = t.out_of_memory;
  counts["fitting"] = t.fitting;
  OrderedJson by = OrderedJson::object();
  for (const auto& [field, c] : t.invalid_by_field)
    by[field] = {{"count", c.count}, {"example", c.example}};
  counts["invalid_by_field"] = by;
  res["counts"] = counts;
  res["space"] = space.describe();
  res["capacity_bytes"] = capacity;
  res["resimulated"] = r.ranked.size();
  res["exact_resimulated"] = r.resimulated;
  res["winner_stable"] = r.winner_stable;
  res["stable_margin"] = r.stable_margin;
  res["simulation_failures"] = r.failed;
  if (r.failed > 0) res["first_simulation_failure"] = r.first_failure;
  OrderedJson agreement;
  agreement["spearman_resimulated"] = nullable(r.rho_resimulated);
  agreement["sample_size"] = r.sample_times.size();
  agreement["spearman_sample"] = nullable(r.rho_sample);
  res["rank_agreement"] = agreement;
  OrderedJson plans = OrderedJson::array();
  for (size_t i = 0; i < r.ranked.size() && i < static_cast<size_t>(top); ++i) {
    const auto& c = r.ranked[i];
    OrderedJson p;
    p["rank"] = i + 1;
    p["id"] = c.id;
    p["fast_rank"] = c.fast_rank;
    p["plan"] = plan_output_json(c.plan);
    p["step_time_s"] = c.report.step_time_s;
    p["fast_step_time_s"] = c.fast_step_s;
    p["tokens_per_s"] = c.report.tokens_per_s;
    p["tokens_per_s_per_gpu"] = tokens_per_s_per_gpu(c.report.tokens_per_s, c.plan);
    p["mfu"] = c.report.mfu;
    p["peak_memory_bytes"] = c.report.memory.peak_bytes;
    p["bubble_time_s"] = c.report.bubble_time_s;
    p["bubble_fraction"] = c.report.bubble_fraction;
    p["exposed_comm_time_s"] = c.report.exposed_comm_time_s;
    OrderedJson exposed;
    for (models::Dim d : models::REPORTED_COMM_DIMS)
      exposed[models::to_string(d)] = c.report.exposed_comm_s[models::index(d)];
    p["exposed_comm_time_s_by_kind"] = exposed;
    const PlanBands& b = rb.bands[i];
    p["step_time_s_band"] = band_pair(b.time.of_time(c.report.step_time_s));
    p["tokens_per_s_band"] = band_pair(b.time.of_rate(c.report.tokens_per_s));
    p["mfu_band"] = band_pair(b.time.of_rate(c.report.mfu));
    p["peak_memory_bytes_band"] = band_pair(b.memory.of_time(c.report.memory.peak_bytes));
    p["statistically_tied"] = rb.tied(i, r);
    p["bands"] = bands_json(b);
    plans.push_back(p);
  }
  res["plans"] = plans;
  if (r.ranked.size() >= 2) {
    const auto d = strategies::largest_difference(r.ranked[0].report, r.ranked[1].report);
    OrderedJson why;
    why["difference_s"] = r.ranked[1].report.step_time_s - r.ranked[0].report.step_time_s;
    why["largest_part"] = d.part;
    why["winner_s"] = d.first_s;
    why["runner_up_s"] = d.second_s;
    why["differs_in"] = differences(r.ranked[0].plan, r.ranked[1].plan);
    res["winner_vs_runner_up"] = why;
  }
  return res;
}

std::string render_csv(const strategies::SearchResult& r, int top, const RankedBands& rb) {
  CsvTable csv("search", 1,
               {"rank",
                "id",
                "tp",
                "pp",
                "dp",
                "cp",
                "ep",
                "vpp",
                "mbs",
                "schedule",
                "zero",
                "recompute",
                "sp",
                "overlap_grad_reduce",
                "overlap_param_gather",
                "tp_comm_overlap",
                "overlap_moe_expert_parallel_comm",
                "step_time_s",
                "fast_step_time_s",
                "fast_rank",
                "tokens_per_s",
                "tokens_per_s_per_gpu",
                "mfu",
                "peak_memory_bytes",
                "bubble_time_s",
                "exposed_comm_time_s",
                "step_time_s_band_lo",
                "step_time_s_band_hi",
                "band_runs",
                "band_extrapolation",
                "statistically_tied"});
  const auto whole = [](auto n) { return std::to_string(n); };
  for (size_t i = 0; i < r.ranked.size() && i < static_cast<size_t>(top); ++i) {
    const auto& c = r.ranked[i];
    const auto& p = c.plan;
    csv.add_row({whole(i + 1),
                 whole(c.id),
                 whole(p.tp),
                 whole(p.pp),
                 whole(p.dp),
                 whole(p.cp),
                 whole(p.ep),
                 whole(p.vpp),
                 whole(p.mbs),
                 models::to_string(p.schedule),
                 whole(p.zero),
                 models::to_string(p.recompute),
                 csv_bool(p.sp),
                 csv_bool(p.overlap_grad_reduce),
                 csv_bool(p.overlap_param_gather),
                 csv_bool(p.tp_comm_overlap),
                 csv_bool(p.overlap_moe_expert_parallel_comm),
                 csv_number(c.report.step_time_s),
                 csv_number(c.fast_step_s),
                 whole(c.fast_rank),
                 csv_number(c.report.tokens_per_s),
                 csv_number(tokens_per_s_per_gpu(c.report.tokens_per_s, p)),
                 csv_number(c.report.mfu),
                 csv_number(c.report.memory.peak_bytes),
                 csv_number(c.report.bubble_time_s),
                 csv_number(c.report.exposed_comm_time_s),
                 csv_number(rb.bands[i].time.of_time(c.report.step_time_s).first),
                 csv_number(rb.bands[i].time.of_time(c.report.step_time_s).second),
                 whole(rb.bands[i].time.runs),
                 rb.bands[i].time.extrapolation ? "true" : "false",
                 rb.tied(i, r) ? "true" : "false"});
  }
  return csv.render();
}

}  // namespace

Command add_search_command(CLI::App& root) {
  auto flags = std::make_shared<SearchFlags>();
  Command command;
  CLI::App* app =
      root.add_subcommand("search",
                          "the fastest plans for a model on a cluster: every plan over the free "
                          "dimensions, the best re-simulated (docs/search.md)");
  command.app = app;
  app->add_option("--model", flags->model,
                  "model preset, loom model JSON or HF config.json (or the shape in "
                  "--megatron-args)");
  add_cluster_flags(*app, flags->cluster, true);
  add_plan_flags(*app, flags->plan);
  add_emit_flag(*app, flags->plan);
  app->add_option("--top", flags->top, "plans to list")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app->add_option("--threads", flags->threads, "worker threads (default: the hardware's)")
      ->check(CLI::Range(1, 4096));
  app->add_option(
         "--exact", flags->exact,
         "candidates re-simulated by the step simulator first (default: max(4 x top, 32)); "
         "then more, up to 8x, until the winner is stable (docs/search.md)")
      ->check(CLI::Range(1, 1000000));
  app->add_option("--sample", flags->sample,
                  "also simulate N random fitting plans and report the fast tier's rank "
                  "agreement on them")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  app->add_option("--network", flags->network, "network model: flow|analytical|ideal")
      ->check(CLI::IsMember({"flow", "analytical", "ideal"}))
      ->capture_default_str();
  app->add_option("--calibration", flags->calibration,
                  "profile with a fitted network (`loom calibrate fit-network`): collectives "
                  "timed with its parameters");
  add_format_flag(*app, flags->format, {"table", "json", "csv"});
  add_shard_flags(*app, flags->shards);
  command.run = [flags]() -> int {
    const SearchFlags& f = *flags;
    const models::ModelSpec model = load_plan_model(f.model, f.plan);
    const topo::Cluster cluster = resolve_cluster(f.cluster);
    // The fingerprint names the cluster and the network model: shards of another merge not.
    const strategies::PlanInput input = merged_input(f.plan, &model);
    note_deepspeed_autos(f.plan, input, nullptr, &model);
    const strategies::SearchSpace space(
        model, input, cluster.num_gpus(),
        cluster.name + ", network " + f.network +
            (f.calibration.empty() ? "" : ", calibration " + f.calibration));
    if (f.plan.print_config) {
      std::cout << "search space: " << space.describe() << "\n";
      return 0;
    }
    strategies::SearchOptions options;
    options.top = f.top;
    options.exact = f.exact;
    options.sample = f.sample;
    options.threads = f.threads > 0 ? f.threads : default_search_threads();
    options.simulate.network = sim::parse_network_mode(f.network, "--network");
    const Format format = parse_format(f.format);
    std::optional<NetworkCalibration> calibrated;
    if (!f.calibration.empty()) {
      calibrated = require_fitted_network(f.calibration, &cluster, cluster.gpu.name,
                                          options.simulate, format == Format::JSON);
    }
    ProgressBar bar = ProgressBar::on_stderr("loom search");
    options.progress = [&bar](const char* tier, std::int64_t done, std::int64_t total) {
      // The fast tier estimates every layout, then the exact tier simulates the best few: the
      // bar restarts at 0% with the phase's name.
      const bool fast = std::string_view(tier) == "fast";
      bar.phase(fast ? "fast estimates (1/2)" : "exact simulations (2/2)");
      bar.update(done, total, fast ? "layouts" : "plans");
    };
    const auto answer = run_sharded_search(model, space, cluster, options, f.shards, std::cout);
    bar.clear();  // before anything is printed: the answer never shares a line with the bar
    if (!answer) return 0;  // a partial result (--shard), or an MPI rank other than 0
    const strategies::SearchResult& r = *answer;
    if (f.plan.emit && !r.ranked.empty()) {  // the winner
      print_emit(f.plan, model, r.ranked.front().plan);
      return 0;
    }
    if (format == Format::JSON) {
      OrderedJson context;
      context["model"] = model.name;
      context["cluster"] = cluster.name;
      context["gpus"] = cluster.num_gpus();
      context["network"] = f.network;
      context["top"] = f.top;
      context["exact"] = options.exact_count();
      context["sample"] = f.sample;
      if (calibrated) {
        context["calibration"] = coverage_json(
            f.calibration, calibrated->network,
            tier_coverage(calibrated->network, cluster.gpus_per_node()), calibrated->notes);
      }
      std::cout << render_document(make_document(
          context,
          render_results(space, r, cluster.gpu.hbm_bytes, f.top, ranked_bands(model, cluster, r))));
    } else if (format == Format::CSV) {
      std::cout << render_csv(r, f.top, ranked_bands(model, cluster, r));
    } else {
      std::cout << render_table(model, cluster, space, r, f);
      if (calibrated) {
        std::cout << "\n"
                  << coverage_note(tier_coverage(calibrated->network, cluster.gpus_per_node()));
      }
    }
    return 0;
  };
  return command;
}

}  // namespace loom::cli
