#include "cli/plan_output.hpp"
#include "cli/plan_text.hpp"

#include <fmt/format.h>

#include <cmath>

#include "cli/plan_chart.hpp"
#include "cli/plan_label.hpp"
#include "common/csv.hpp"
#include "common/document.hpp"
#include "common/strings.hpp"
#include "common/table.hpp"
#include "common/units.hpp"
#include "strategies/plan/plan_json.hpp"

namespace loom::cli {
namespace {

constexpr double DAY_S = strategies::SECONDS_PER_DAY;
constexpr double MWH_J = 3.6e9;

// 90 -> "90 s", 1500 -> "25.0 min", 11124 -> "3.1 h", 4e6 -> "46.3 d".
std::string duration(double s) {
  if (!std::isfinite(s)) return "never";
  if (s < 120) return fmt::format("{:.0f} s", s);
  if (s < 7200) return fmt::format("{:.1f} min", s / 60);
  if (s < 2 * DAY_S) return fmt::format("{:.1f} h", s / strategies::SECONDS_PER_HOUR);
  return fmt::format("{:.1f} d", s / DAY_S);
}

std::string money(double usd) {
  if (usd >= 1e9) return fmt::format("${:.2f}B", usd / 1e9);
  if (usd >= 1e6) return fmt::format("${:.2f}M", usd / 1e6);
  if (usd >= 1e3) return fmt::format("${:.1f}k", usd / 1e3);
  return fmt::format("${:.0f}", usd);
}

std::string energy(double joules) {
  const double mwh = joules / MWH_J;
  if (mwh >= 10000 && mwh < 1e15) return fmt::format("{:.1f} GWh", mwh / 1000);
  if (mwh < 10) return fmt::format("{} kWh", format_rounded(mwh * 1000));
  return fmt::format("{} MWh", format_rounded(mwh));
}

// Days with one decimal, or three below one day (plan_days_text).
std::string days(double seconds) {
  return plan_days_text(seconds, 3);
}

// The first feasible row (its plan holds what every row shares: batch, precision, ...).
const strategies::CapacityRow* first_feasible(const PlanOutput& out) {
  for (const auto& r : out.rows)
    if (r.feasible) return &r;
  return nullptr;
}

std::string short_reason(const strategies::CapacityRow& r) {
  if (r.failure == ExitCode::BAD_INPUT) return "no valid plan";
  if (r.run.ideal_s > 0 && !r.run.finishes()) return "never finishes";
  return "no plan fits";
}

std::string header(const PlanOutput& out) {
  const auto& o = out.options;
  const auto* any = first_feasible(out);
  std::string s =
      fmt::format("loom plan: {} ({} parameters) on {} tokens", out.model->name,
                  format_count(models::count_parameters(*out.model).total), out.tokens_text);
  if (any) {
    const auto& p = any->plan;
    s += fmt::format("; gbs {} x seq {} = {} tokens per step, {} {}", p.global_batch(), p.seq,
                     format_count(static_cast<double>(p.global_batch() * p.seq)), precision_text(p),
                     models::to_string(p.optimizer));
  }
  s += "\n";
  s += fmt::format("goodput: {:.3g} failures per GPU-hour ({}); checkpoint",
                   o.goodput.failures_per_gpu_hour, out.failure_rate_source);
  if (any) s += fmt::format(" {} (weights + optimizer)", format_bytes(any->checkpoint_bytes));
  s += fmt::format(" written at {}, restart {}, interval sqrt(2 x write x MTBF) (Young/Daly)\n",
                   format_bandwidth(o.goodput.checkpoint_write_Bps), duration(o.goodput.restart_s));
  std::vector<std::string> priced;
  for (std::size_t t = 0; t < out.targets.size(); ++t)
    if (out.prices[t])
      priced.push_back(fmt::format("{} ${}", out.targets[t].label, *out.prices[t]));
  s += fmt::format("energy: board power x GPUs x expected hours x PUE {:.2f}; cost: {}\n", o.pue,
                   priced.empty() ? "no --price given"
                                  : "price per GPU-hour x GPU-hours (" + join(priced, ", ") + ")");
  s += fmt::format(
      "each configuration: the search's fastest plan (fast tier over the space, then its best "
      "{} simulated, and further down its ranking until the winner is stable, at most {}; "
      "network {}){}\n\n",
      o.search.exact_count(), o.search.keep_count(), out.network,
      out.pinned.empty()
          ? std::string()
          : "; pinned by loom plan: " + join(out.pinned, ", ") + " (--full-space frees them)");
  return s;
}

// The expected days' band of row i: "55.1-80.3".
std::string days_band(const PlanOutput& out, std::size_t i) {
  const auto [lo, hi] = out.bands[i].time.of_time(out.rows[i].run.expected_s);
  return fmt::format("{}-{}", days(lo), days(hi));
}

// The band under the table: its coverage, the runs behind the chosen (or first) row's band.
std::string band_note(const PlanOutput& out) {
  const std::size_t i = out.selection ? out.selection->row : 0;
  const auto* any = first_feasible(out);
  if (!any) return "";
  const std::size_t k = out.selection ? i : static_cast<std::size_t>(any - out.rows.data());
  const auto& b = out.bands[k].time;
  std::string s =
      "80% band: loom's step-time residuals on published runs like the plan, applied "
      "to days, GPU-hours and cost; ";
  s += b.extrapolation
           ? fmt::format("{} x {}: no published run within this regime ({}): extrapolation\n",
                         out.targets[out.rows[k].target].label, format_grouped(out.rows[k].gpus),
                         b.label)
           : fmt::format("{} x {}: from {} published runs like it: {}\n",
                         out.targets[out.rows[k].target].label, format_grouped(out.rows[k].gpus),
                         b.runs, b.label);
  return s;
}

std::string selection_line(const PlanOutput& out) {
  if (!out.selection) return "";
  const PlanSelection& sel = *out.selection;
  const auto& r = out.rows[sel.row];
  const auto& t = out.targets[r.target];
  const std::string what =
      sel.by_days ? fmt::format("cheapest{} finishing within {} days",
                                sel.by_gpu_hours ? " (fewest GPU-hours: no --price)" : "",
                                format_number(sel.limit))
                  : fmt::format("fastest within a budget of {}", money(sel.limit));
  std::string line = fmt::format(
      "{}: {} x {} ({}), {} days expected (80% band {}), {} GPU-hours{}\n", what, t.label,
      format_grouped(r.gpus), plan_label(r.plan), days(r.run.expected_s), days_band(out, sel.row),
      format_rounded(r.gpu_hours), r.cost ? ", " + money(*r.cost) : std::string());
  if (out.confidence) {
    const double ratio = out.bands[sel.row].time.upper_ratio(*out.confidence);
    line += fmt::format(
        "  chosen at --confidence {:g}: {} days, {} GPU-hours{} at the band's one-sided {:.0f}% "
        "edge\n",
        *out.confidence, days(r.run.expected_s * ratio), format_rounded(r.gpu_hours * ratio),
        r.cost ? ", " + money(*r.cost * ratio) : std::string(), 100 * *out.confidence);
  }
  return line;
}

}  // namespace

std::string plan_days_text(double seconds, int small_digits) {
  const double d = seconds / DAY_S;
  if (!std::isfinite(d) || d >= 1e6) return fmt::format("{:.3g}", d);
  return d < 1 ? fmt::format("{:.{}f}", d, small_digits) : fmt::format("{:.1f}", d);
}

std::string render_plan_table(const PlanOutput& out) {
  std::string s = header(out);
  const bool costs = std::any_of(out.prices.begin(), out.prices.end(),
                                 [](const auto& p) { return p.has_value(); });
  std::vector<std::string> heads = {"gpu",          "GPUs", "nodes",    "plan",      "tokens/s",
                                    "tokens/s/GPU", "MFU",  "ideal d",  "MTBF",      "ckpt every",
                                    "goodput",      "days", "80% band", "GPU-hours", "energy"};
  if (costs) heads.push_back("cost");
  if (out.selection) heads.insert(heads.begin(), "");
  Table table(heads);
  const std::size_t shift = out.selection ? 1 : 0;
  table.align_left(shift + 0);
  table.align_left(shift + 3);
  std::string notes;
  for (std::size_t i = 0; i < out.rows.size(); ++i) {
    const auto& r = out.rows[i];
    const auto& t = out.targets[r.target];
    std::vector<std::string> cells = {t.label, format_grouped(r.gpus), format_grouped(r.nodes)};
    if (r.feasible) {
      cells.insert(
          cells.end(),
          {plan_label(r.plan), format_count(r.tokens_per_s),
           format_count(tokens_per_s_per_gpu(r.tokens_per_s, r.plan)), format_percent(r.mfu),
           days(r.run.ideal_s), duration(r.run.mtbf_s), duration(r.run.checkpoint_interval_s),
           format_percent(r.run.goodput), days(r.run.expected_s), days_band(out, i),
           format_rounded(r.gpu_hours), energy(r.energy_joules)});
      if (costs) cells.push_back(r.cost ? money(*r.cost) : "-");
    } else {
      cells.push_back(short_reason(r) + " (below)");
      cells.resize(heads.size() - shift, "-");
      notes += fmt::format("  {} x {}: {}\n", t.label, format_grouped(r.gpus), r.reason);
    }
    if (out.selection) cells.insert(cells.begin(), out.selection->row == i ? "*" : "");
    table.add_row(cells);
  }
  s += table.render();
  s += fmt::format(
      "{}; ideal d: days without failures; days: expected, with failures and checkpoints\n",
      PLAN_LABEL_LEGEND);
  s += band_note(out);
  if (!notes.empty()) s += "not planned:\n" + notes;
  return s + selection_line(out);
}

std::string render_plan_json(const PlanOutput& out) {
  const auto& o = out.options;
  OrderedJson context;
  context["model"] = out.model->name;
  context["tokens"] = o.tokens;
  OrderedJson types = OrderedJson::array();
  for (std::size_t t = 0; t < out.targets.size(); ++t) {
    const auto& x = out.targets[t];
    types.push_back({{"name", x.label},
                     {"cluster", x.cluster_spec},
                     {"gpu", x.gpu},
                     {"gpus_per_node", x.gpus_per_node},
                     {"board_watts", x.board_watts},
                     {"price_usd_per_gpu_hour",
                      out.prices[t] ? OrderedJson(*out.prices[t]) : OrderedJson(nullptr)}});
  }
  context["gpu_types"] = types;
  context["failures_per_gpu_hour"] = o.goodput.failures_per_gpu_hour;
  context["checkpoint_write_Bps"] = o.goodput.checkpoint_write_Bps;
  context["restart_s"] = o.goodput.restart_s;
  context["pue"] = o.pue;
  context["network"] = out.network;
  context["exact"] = o.search.exact_count();
  context["pinned"] = out.pinned;
  OrderedJson rows = OrderedJson::array();
  for (std::size_t i = 0; i < out.rows.size(); ++i) {
    const auto& r = out.rows[i];
    OrderedJson j;
    j["gpu_type"] = out.targets[r.target].label;
    j["gpus"] = r.gpus;
    j["nodes"] = r.nodes;
    j["feasible"] = r.feasible;
    if (!r.feasible) {
      j["reason"] = r.reason;
      rows.push_back(j);
      continue;
    }
    j["plan"] = plan_output_json(r.plan);
    j["step_time_s"] = r.step_time_s;
    j["tokens_per_s"] = r.tokens_per_s;
    j["tokens_per_s_per_gpu"] = tokens_per_s_per_gpu(r.tokens_per_s, r.plan);
    j["mfu"] = r.mfu;
    j["peak_memory_bytes"] = r.peak_memory_bytes;
    j["checkpoint_bytes"] = r.checkpoint_bytes;
    j["checkpoint_write_s"] = r.run.checkpoint_write_s;
    j["checkpoint_interval_s"] = r.run.checkpoint_interval_s;
    j["mtbf_s"] = r.run.mtbf_s;
    j["expected_failures"] = r.run.expected_failures;
    j["goodput"] = r.run.goodput;
    j["ideal_days"] = r.run.ideal_s / DAY_S;
    j["expected_days"] = r.run.expected_s / DAY_S;
    j["ideal_gpu_hours"] = r.ideal_gpu_hours;
    j["gpu_hours"] = r.gpu_hours;
    j["energy_mwh"] = r.energy_joules / MWH_J;
    j["cost_usd"] = r.cost ? OrderedJson(*r.cost) : OrderedJson(nullptr);
    const PlanBands& b = out.bands[i];
    j["step_time_s_band"] = band_pair(b.time.of_time(r.step_time_s));
    j["tokens_per_s_band"] = band_pair(b.time.of_rate(r.tokens_per_s));
    j["mfu_band"] = band_pair(b.time.of_rate(r.mfu));
    j["peak_memory_bytes_band"] = band_pair(b.memory.of_time(r.peak_memory_bytes));
    j["expected_days_band"] = band_pair(b.time.of_time(r.run.expected_s / DAY_S));
    j["gpu_hours_band"] = band_pair(b.time.of_time(r.gpu_hours));
    j["cost_usd_band"] = r.cost ? band_pair(b.time.of_time(*r.cost)) : OrderedJson(nullptr);
    j["bands"] = bands_json(b);
    rows.push_back(j);
  }
  OrderedJson results;
  results["configurations"] = rows;
  if (out.selection) {
    const auto& sel = *out.selection;
    results["selection"] = {
        {"criterion", sel.by_days ? "cheapest_within_days" : "fastest_within_budget"},
        {"limit", sel.limit},
        {"ranked_by", sel.by_days ? (sel.by_gpu_hours ? "gpu_hours" : "cost") : "expected_days"},
        {"index", sel.row},
        {"confidence", out.confidence ? OrderedJson(*out.confidence) : OrderedJson(nullptr)}};
  }
  return render_document(make_document(context, results));
}

std::string render_plan_csv(const PlanOutput& out) {
  // The configuration, why it has no plan (empty when feasible), its plan with the overlap
  // switches in effect, then its results.
  std::vector<std::string> header = {"gpu_type", "gpus", "nodes", "feasible", "reason"};
  for (const char* key : {"tp", "pp", "dp", "cp", "ep", "vpp", "mbs", "schedule", "zero",
                          "recompute", "sp", "overlap_grad_reduce", "overlap_param_gather",
                          "tp_comm_overlap", "overlap_moe_expert_parallel_comm"})
    header.push_back(key);
  for (const char* key :
       {"step_time_s", "tokens_per_s", "tokens_per_s_per_gpu", "mfu", "ideal_days", "mtbf_s",
        "checkpoint_interval_s", "goodput", "expected_days", "gpu_hours", "energy_mwh", "cost_usd",
        "expected_days_band_lo", "expected_days_band_hi", "band_runs", "band_extrapolation"})
    header.push_back(key);
  CsvTable csv("plan", 1, header);
  for (std::size_t i = 0; i < out.rows.size(); ++i) {
    const auto& r = out.rows[i];
    std::vector<std::string> fields = {out.targets[r.target].label, std::to_string(r.gpus),
                                       std::to_string(r.nodes), csv_bool(r.feasible),
                                       r.feasible ? "" : r.reason};
    if (r.feasible) {
      const auto& p = r.plan;
      for (std::int64_t v : {std::int64_t{p.tp}, std::int64_t{p.pp}, std::int64_t{p.dp},
                             std::int64_t{p.cp}, std::int64_t{p.ep}, std::int64_t{p.vpp}, p.mbs})
        fields.push_back(std::to_string(v));
      fields.insert(
          fields.end(),
          {models::to_string(p.schedule), std::to_string(p.zero), models::to_string(p.recompute),
           csv_bool(p.sp), csv_bool(p.overlap_grad_reduce), csv_bool(p.overlap_param_gather),
           csv_bool(p.tp_comm_overlap), csv_bool(p.overlap_moe_expert_parallel_comm)});
      for (double v :
           {r.step_time_s, r.tokens_per_s, tokens_per_s_per_gpu(r.tokens_per_s, p), r.mfu,
            r.run.ideal_s / DAY_S, r.run.mtbf_s, r.run.checkpoint_interval_s, r.run.goodput,
            r.run.expected_s / DAY_S, r.gpu_hours, r.energy_joules / MWH_J})
        fields.push_back(csv_number(v));
      fields.push_back(r.cost ? csv_number(*r.cost) : "");
      const auto& b = out.bands[i].time;
      const auto [lo, hi] = b.of_time(r.run.expected_s / DAY_S);
      fields.insert(fields.end(), {csv_number(lo), csv_number(hi), std::to_string(b.runs),
                                   csv_bool(b.extrapolation)});
    }
    fields.resize(header.size());  // a configuration without a plan leaves the rest empty
    csv.add_row(std::move(fields));
  }
  return csv.render();
}

std::string render_plan_svg(const PlanOutput& out) {
  std::vector<ChartSeries> series(out.targets.size());
  for (std::size_t t = 0; t < out.targets.size(); ++t) series[t].name = out.targets[t].label;
  for (const auto& r : out.rows) {
    const double gpus = static_cast<double>(r.gpus);
    if (!r.feasible) {
      series[r.target].infeasible.push_back(gpus);
      continue;
    }
    series[r.target].days.push_back({gpus, r.run.expected_s / DAY_S});
    if (r.cost) series[r.target].cost.push_back({gpus, *r.cost});
  }
  std::optional<std::pair<std::size_t, double>> marked;
  if (out.selection) {
    const auto& r = out.rows[out.selection->row];
    marked = std::make_pair(r.target, static_cast<double>(r.gpus));
  }
  const std::string title = fmt::format("{} on {} tokens: expected days to train by GPU count",
                                        out.model->name, out.tokens_text);
  std::optional<double> days_limit;
  if (out.selection && out.selection->by_days) days_limit = out.selection->limit;
  return render_plan_chart(title, series, marked, days_limit);
}

}  // namespace loom::cli
