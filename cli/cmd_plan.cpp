// `loom plan`: how many GPUs of which kind, for how many days and how much money, to train a
// model on a number of tokens. Each GPU type at each GPU count gets the search's fastest
// plan (strategies/search), then the goodput model, GPU-hours, energy and cost
// (strategies/capacity, docs/plan.md). --days / --budget pick the cheapest configuration
// within a time limit or the fastest within a budget.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <iostream>

#include "cli/cmd_calibrate_network.hpp"
#include "cli/commands.hpp"
#include "cli/flag_grammars.hpp"
#include "cli/output_file.hpp"
#include "cli/plan_flags.hpp"
#include "cli/plan_output.hpp"
#include "cli/progress.hpp"
#include "cli/search_shards.hpp"
#include "common/error.hpp"
#include "common/limits.hpp"
#include "common/units.hpp"
#include "models/model_loader.hpp"
#include "strategies/capacity/capacity.hpp"

namespace loom::cli {
namespace {

struct PlanCommandFlags {
  std::string model;
  std::string tokens;
  std::vector<std::string> gpu = {"h100", "h200", "b200"};
  std::vector<std::int64_t> gpus;
  std::optional<double> days;
  std::optional<double> budget;
  std::optional<double> confidence;  // --days / --budget read the band's upper edge
  std::vector<std::string> price;
  double pue = strategies::DEFAULT_PUE;
  std::optional<double> failure_rate;
  std::optional<std::string> checkpoint_bandwidth;  // unset: DEFAULT_CHECKPOINT_WRITE_BPS
  std::optional<std::string> restart;               // unset: DEFAULT_RESTART_S
  bool full_space = false;
  int threads = 0;  // 0: the hardware's
  int exact = 2;
  std::string network = "flow";
  std::string format;
  std::string chart;
  PlanFlags plan;
  std::string calibration;  // profile with a fitted network; empty: loom's defaults
};

}  // namespace

// "15T" -> 1.5e13: a count with an optional K, M, B (or G) or T suffix (powers of 1000).
double parse_tokens(const std::string& text) {
  const char* begin = text.data();
  const char* end = begin + text.size();
  double number = 0;
  const auto [ptr, ec] = std::from_chars(begin, end, number);
  double factor = 0;
  const std::string suffix(ptr, end);
  if (suffix.empty())
    factor = 1;
  else if (suffix == "K" || suffix == "k")
    factor = 1e3;
  else if (suffix == "M")
    factor = 1e6;
  else if (suffix == "B" || suffix == "G")
    factor = 1e9;
  else if (suffix == "T")
    factor = 1e12;
  if (ec != std::errc() || ptr == begin || factor == 0 || !std::isfinite(number) || number <= 0 ||
      !std::isfinite(number * factor)) {
    throw ValidationError::bad_value("--tokens", text,
                                     "a positive token count, e.g. 15T, 300B, 2.5e12");
  }
  if (number * factor > MAX_TRAINING_TOKENS) {
    throw ValidationError::bad_value(
        "--tokens", text,
        fmt::format("a token count up to {:g} (loom's limit MAX_TRAINING_TOKENS, "
                    "docs/limits.md; the largest published runs train on about 4e13)",
                    MAX_TRAINING_TOKENS));
  }
  return number * factor;
}

namespace {

// The dimensions `loom plan` pins unless the flags set them (or --full-space): the search per
// configuration then takes seconds, not minutes (docs/plan.md gives the price of it).
std::vector<std::string> pin_defaults(strategies::PlanInput& input) {
  std::vector<std::string> pinned;
  const auto pin = [&](const char* key, strategies::PlanValue value, const char* label) {
    if (input.has(key)) return;
    input.set(key, value);
    pinned.emplace_back(label);
  };
  pin("zero", std::int64_t{1}, "zero 1");
  pin("overlap_grad_reduce", true, "overlap-grad-reduce");
  pin("overlap_param_gather", true, "overlap-param-gather");
  return pinned;
}

std::vector<std::pair<std::string, std::string>> price_pairs(
    const std::vector<std::string>& items) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& item : items) {
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw ValidationError::bad_value("--price", item,
                                       "NAME=USD_PER_GPU_HOUR, e.g. h100=2.10 (one per GPU type)");
    }
    out.emplace_back(item.substr(0, eq), item.substr(eq + 1));
  }
  return out;
}

// The first GPU type without a price; nullptr when every type has one.
const strategies::CapacityTarget* first_unpriced(const PlanOutput& out) {
  for (std::size_t t = 0; t < out.targets.size(); ++t)
    if (!out.prices[t]) return &out.targets[t];
  return nullptr;
}

// --budget needs a price for every GPU type; so does --days once any price is given (costs
// and GPU-hours do not compare).
void check_prices(const PlanCommandFlags& f, const PlanOutput& out) {
  if (!f.days && !f.budget) return;
  const strategies::CapacityTarget* unpriced = first_unpriced(out);
  if (!unpriced) return;
  const bool none_priced = std::none_of(out.prices.begin(), out.prices.end(),
                                        [](const auto& p) { return p.has_value(); });
  if (f.days && none_priced) return;
  throw ValidationError(
      "--price",
      fmt::format("--price: no price for {}; {} needs a price per GPU-hour for every "
                  "--gpu type (e.g. --price {}=2.50)",
                  unpriced->label, f.budget ? "--budget" : "--days with prices", unpriced->label));
}

// The rows with expected time, GPU-hours and cost at their step-time band's one-sided
// `confidence` edge (days, GPU-hours and cost scale with step time; the goodput model's
// failure and checkpoint overheads are taken to scale with it too).
std::vector<strategies::CapacityRow> at_confidence(const PlanOutput& out, double confidence) {
  std::vector<strategies::CapacityRow> rows = out.rows;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (!rows[i].feasible) continue;
    const double ratio = out.bands[i].time.upper_ratio(confidence);
    rows[i].run.expected_s *= ratio;
    rows[i].run.ideal_s *= ratio;
    rows[i].gpu_hours *= ratio;
    if (rows[i].cost) *rows[i].cost *= ratio;
  }
  return rows;
}

// The --days / --budget choice; throws InfeasibleError when nothing qualifies.
std::optional<PlanSelection> select(const PlanCommandFlags& f, const PlanOutput& out) {
  if (!f.days && !f.budget) return std::nullopt;
  const std::vector<strategies::CapacityRow> rows =
      f.confidence ? at_confidence(out, *f.confidence) : out.rows;
  PlanSelection sel;
  sel.by_days = f.days.has_value();
  sel.limit = f.days ? *f.days : *f.budget;
  sel.by_gpu_hours = sel.by_days && first_unpriced(out) != nullptr;
  const auto best = sel.by_days ? strategies::cheapest_within(rows, sel.limit, sel.by_gpu_hours)
                                : strategies::fastest_within(rows, sel.limit);
  if (!best) {
    // The nearest miss: the fastest configuration, or the cheapest.
    const strategies::CapacityRow* near = nullptr;
    for (const auto& r : rows) {
      if (!r.feasible) continue;
      if (!near || (sel.by_days ? r.run.expected_s < near->run.expected_s
                                : r.cost.value_or(0) < near->cost.value_or(0)))
        near = &r;
    }
    if (!near) throw InfeasibleError("loom plan: no configuration has a plan that fits");
    const std::string who = fmt::format("{} x {}", out.targets[near->target].label, near->gpus);
    if (sel.by_days) {
      throw InfeasibleError(fmt::format(
          "--days {}: no configuration finishes within {} day{}; the fastest, {}, takes {} "
          "days (expected); allow more days or try more GPUs (--gpus)",
          format_number(sel.limit), format_number(sel.limit), sel.limit == 1 ? "" : "s", who,
          plan_days_text(near->run.expected_s, 1)));
    }
    throw InfeasibleError(fmt::format(
        "--budget {}: no configuration costs {} or less; the cheapest, {}, costs {}; raise "
        "the budget or try fewer GPUs (--gpus)",
        format_number(sel.limit), format_money(sel.limit), who,
        format_money(near->cost.value_or(0))));
  }
  sel.row = *best;
  return sel;
}

// When no configuration is feasible: the error of the first (bad input before infeasible).
void check_any_feasible(const PlanOutput& out) {
  const strategies::CapacityRow* first = nullptr;
  for (const auto& r : out.rows) {
    if (r.feasible) return;
    if (!first || (r.failure == ExitCode::BAD_INPUT && first->failure != ExitCode::BAD_INPUT))
      first = &r;
  }
  if (!first) throw InternalError("loom plan: no configuration to plan");
  const std::string msg = fmt::format("loom plan: no configuration can train; {} x {}: {}",
                                      out.targets[first->target].label, first->gpus, first->reason);
  if (first->failure == ExitCode::BAD_INPUT) throw ValidationError("plan", msg);
  throw InfeasibleError(msg);
}

void add_flags(CLI::App& app, PlanCommandFlags& f) {
  app.add_option("--model", f.model, "model preset, loom model JSON or HF config.json")->required();
  app.add_option("--tokens", f.tokens, "tokens to train on: 15T, 300B, 2.5e12")->required();
  app.add_option("--gpu", f.gpu,
                 "GPU types: a GPU (its cluster preset), a cluster preset or a cluster JSON")
      ->capture_default_str();
  app.add_option("--gpus", f.gpus,
                 fmt::format("GPU counts (rounded up to whole nodes; default 1, 2, 4, ... nodes up "
                             "to {} GPUs)",
                             format_grouped(strategies::DEFAULT_SWEEP_MAX_GPUS)))
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 19));
  // Checked in check_limits: CLI::PositiveNumber's message spells its bound in 309 digits.
  auto* days = app.add_option("--days", f.days, "the cheapest configuration finishing in D days");
  auto* budget = app.add_option("--budget", f.budget,
                                "the fastest configuration costing at most B US dollars");
  days->excludes(budget);
  app.add_option("--confidence", f.confidence,
                 "with --days / --budget: choose by the error band's upper edge at this "
                 "one-sided confidence (0.9: days and cost that runs like it stay under 9 "
                 "times in 10; docs/plan.md)")
      ->check(CLI::Range(0.5, 0.99));
  app.add_option("--price", f.price, "price per GPU-hour in US dollars, per GPU type: h100=2.10");
  app.add_option("--pue", f.pue, "power usage effectiveness (facility / IT power)")
      ->check(CLI::Range(1.0, 10.0))
      ->capture_default_str();
  app.add_option("--failure-rate", f.failure_rate,
                 fmt::format("failures per GPU-hour (default: Llama 3's, {:.3g}; 0: none)",
                             strategies::LLAMA3_FAILURES_PER_GPU_HOUR))
      ->check(CLI::NonNegativeNumber);
  app.add_option("--checkpoint-bandwidth", f.checkpoint_bandwidth,
                 fmt::format("aggregate checkpoint write bandwidth (default: {})",
                             format_bandwidth(strategies::DEFAULT_CHECKPOINT_WRITE_BPS)));
  app.add_option("--restart-time", f.restart,
                 fmt::format("time from a failure to training again (default: {:g} min)",
                             strategies::DEFAULT_RESTART_S / 60));
  app.add_flag("--full-space", f.full_space,
               "search every free dimension (default: zero 1 and the DP overlaps pinned)");
  app.add_option("--threads", f.threads, "worker threads (default: the hardware's)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--exact", f.exact, "candidates re-simulated per configuration")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--network", f.network, "network model: flow|analytical|ideal")
      ->check(CLI::IsMember({"flow", "analytical", "ideal"}))
      ->capture_default_str();
  app.add_option("--calibration", f.calibration,
                 "profile with a fitted network (`loom calibrate fit-network`): collectives "
                 "timed with its parameters on every target");
  app.add_option("--chart", f.chart, "also write an SVG chart (days vs GPUs, cost) to FILE")
      ->check(output_path_check());
  add_format_flag(app, f.format, {"table", "json", "csv"});
  add_plan_flags(app, f.plan);
  add_emit_flag(app, f.plan);
}

strategies::CapacityOptions capacity_options(const PlanCommandFlags& f) {
  strategies::CapacityOptions o;
  o.tokens = parse_tokens(f.tokens);
  o.pue = f.pue;
  if (f.failure_rate) o.goodput.failures_per_gpu_hour = *f.failure_rate;
  if (f.checkpoint_bandwidth) {
    o.goodput.checkpoint_write_Bps =
        parse_bandwidth(*f.checkpoint_bandwidth, "--checkpoint-bandwidth");
    if (o.goodput.checkpoint_write_Bps <= 0)
      throw ValidationError::not_positive("--checkpoint-bandwidth", *f.checkpoint_bandwidth);
  }
  if (f.restart) o.goodput.restart_s = parse_time(*f.restart, "--restart-time");
  o.search.top = 1;
  o.search.exact = f.exact;
  o.search.threads = f.threads > 0 ? f.threads : default_search_threads();
  o.search.simulate.network = sim::parse_network_mode(f.network, "--network");
  return o;
}

// --days and --budget: positive and finite.
void check_limits(const PlanCommandFlags& f) {
  const auto check = [](const std::optional<double>& value, const char* flag, const char* what) {
    if (value && !(*value > 0 && std::isfinite(*value)))
      throw ValidationError::bad_value(flag, fmt::format("{:g}", *value), what);
  };
  check(f.days, "--days", "a positive number of days, e.g. 30");
  check(f.budget, "--budget", "a positive number of US dollars, e.g. 2e6");
  // Before minutes of search: --confidence only changes what --days / --budget pick.
  if (f.confidence && !f.days && !f.budget)
    throw ValidationError("--confidence",
                          "--confidence picks with --days or --budget; give one of them");
}

// A row's error bands; a GPU outside the catalog (a cluster JSON's own) has no generation
// the track record knows: an extrapolation.
PlanBands row_bands(const models::ModelSpec& model, const strategies::CapacityTarget& t,
                    const strategies::CapacityRow& r) {
  std::string generation = "unknown";
  try {
    generation = topo::to_string(topo::find_gpu(t.gpu, "--gpu").arch);
  } catch (const Error&) {
  }
  return plan_bands(model, r.plan, generation, r.gpus);
}

int run_plan(const PlanCommandFlags& f) {
  check_limits(f);
  if (!f.chart.empty()) check_output_path(f.chart, "--chart");  // before minutes of search
  const models::ModelSpec model = load_plan_model(f.model, f.plan);
  PlanOutput out;
  out.model = &model;
  out.tokens_text = f.tokens;
  out.options = capacity_options(f);
  out.network = f.network;
  out.failure_rate_source =
      f.failure_rate ? "--failure-rate" : "Llama 3, Dubey et al. 2024, Sec. 3.3.4";
  for (const std::string& g : f.gpu) out.targets.push_back(strategies::resolve_target(g, "--gpu"));
  out.prices = strategies::resolve_prices(out.targets, price_pairs(f.price), "--price");
  check_prices(f, out);
  strategies::PlanInput input = merged_input(f.plan, &model);
  note_deepspeed_autos(f.plan, input, nullptr, &model);
  if (!f.full_space) out.pinned = pin_defaults(input);
  if (f.plan.print_config) {
    for (const auto& t : out.targets) {
      for (std::int64_t gpus : strategies::gpu_counts(t, f.gpus)) {
        const strategies::SearchSpace space(model, input, gpus);
        std::cout << fmt::format("{} x {} ({}): search space: {}\n", t.label, gpus, t.cluster_spec,
                                 space.describe());
      }
    }
    return 0;
  }
  const Format format = parse_format(f.format);
  std::optional<NetworkCalibration> calibrated;
  for (const auto& t : out.targets) {
    if (f.calibration.empty()) break;
    // One network for every target; each target whose GPU differs is named.
    NetworkCalibration c = require_fitted_network(
        f.calibration, nullptr, t.gpu, out.options.search.simulate, format == Format::JSON);
    if (!calibrated) calibrated = c;
    for (const auto& note : c.notes)
      if (std::find(calibrated->notes.begin(), calibrated->notes.end(), note) ==
          calibrated->notes.end())
        calibrated->notes.push_back(note);
  }
  ProgressBar bar = ProgressBar::on_stderr("loom plan");
  bar.phase("searching each GPU count");
  out.options.progress = [&bar](std::size_t index, std::size_t total) {
    bar.update(static_cast<std::int64_t>(index), static_cast<std::int64_t>(total), "counts");
  };
  out.rows = strategies::plan_capacity(model, input, out.targets, f.gpus, out.prices, out.options);
  bar.clear();  // before anything is printed: the answer never shares a line with the bar
  check_any_feasible(out);
  for (const auto& r : out.rows) out.bands.push_back(row_bands(model, out.targets[r.target], r));
  out.confidence = f.confidence;
  out.selection = select(f, out);
  if (f.plan.emit) {
    if (!out.selection)
      throw ValidationError("--emit",
                            "--emit: loom plan emits the configuration --days or "
                            "--budget picks; give one of them");
    print_emit(f.plan, model, out.rows[out.selection->row].plan);
    return 0;
  }
  if (!f.chart.empty()) write_output_file(f.chart, render_plan_svg(out), "--chart");
  if (format == Format::JSON && calibrated) {
    OrderedJson doc = OrderedJson::parse(render_plan_json(out));
    doc["context"]["calibration"] = coverage_json(
        f.calibration, calibrated->network,
        tier_coverage(calibrated->network, out.targets.front().gpus_per_node), calibrated->notes);
    std::cout << render_document(doc);
  } else if (format == Format::JSON)
    std::cout << render_plan_json(out);
  else if (format == Format::CSV)
    std::cout << render_plan_csv(out);
  else
    std::cout << render_plan_table(out);
  if (format == Format::TABLE && calibrated) {
    std::cout << "\n"
              << coverage_note(
                     tier_coverage(calibrated->network, out.targets.front().gpus_per_node));
  }
  return 0;
}

}  // namespace

Command add_plan_command(CLI::App& root) {
  auto flags = std::make_shared<PlanCommandFlags>();
  Command command;
  command.app = root.add_subcommand(
      "plan",
      "GPUs x days x cost to train a model on N tokens: the fastest plan per GPU type and count, "
      "with failures and checkpoints (docs/plan.md)");
  add_flags(*command.app, *flags);
  command.run = [flags]() -> int { return run_plan(*flags); };
  return command;
}

}  // namespace loom::cli
