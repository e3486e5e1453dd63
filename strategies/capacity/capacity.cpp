#include "strategies/capacity/capacity.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

#include "common/strings.hpp"
#include "common/units.hpp"
#include "models/memory.hpp"
#include "topologies/cluster_presets.hpp"

namespace loom::strategies {
namespace {

// Every name --gpu accepts, for did-you-mean: the GPUs that have a preset, and the presets.
std::vector<std::string> target_names() {
  std::vector<std::string> out;
  for (const std::string& g : topo::gpu_names())
    if (topo::cluster_preset_for_gpu(topo::find_gpu(g).name)) out.push_back(g);
  for (const std::string& p : topo::cluster_preset_names()) out.push_back(p);
  return out;
}

// Any name topo::gpu_key takes: keys, aliases, and what vendors and nvidia-smi print.
bool is_gpu_name(const std::string& name) {
  return topo::gpu_key(name).has_value();
}

// A positive price in US dollars per GPU-hour from its text.
double parse_price(const std::string& text, const std::string& field, const std::string& name) {
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(value) || value <= 0) {
    throw ValidationError::bad_value(
        field, name + "=" + text, "NAME=USD_PER_GPU_HOUR with a positive number, e.g. h100=2.10");
  }
  return value;
}

}  // namespace

CapacityTarget resolve_target(const std::string& name, const std::string& field) {
  CapacityTarget t;
  t.label = name;
  const std::vector<std::string> presets = topo::cluster_preset_names();
  if (topo::looks_like_path(name) ||
      std::find(presets.begin(), presets.end(), to_lower(name)) != presets.end()) {
    t.cluster_spec = name;
  } else if (is_gpu_name(name)) {
    const topo::GpuSpec& gpu = topo::find_gpu(name, field);
    const auto preset = topo::cluster_preset_for_gpu(gpu.name);
    if (!preset) {
      throw ValidationError(
          field, fmt::format("{} {}: no cluster preset has {} GPUs; give a cluster JSON file "
                             "with them (docs/clusters.md)",
                             field, name, gpu.name));
    }
    t.cluster_spec = *preset;
  } else {
    throw topo::unknown_gpu(field, name, target_names());
  }
  const topo::Cluster node = topo::load_cluster(topo::ClusterRequest{t.cluster_spec, 1, {}});
  t.gpu = node.gpu.name;
  t.gpu_display = node.gpu.display_name;
  t.gpus_per_node = node.num_gpus();
  const double limit = node.gpu.power_limit_watts;
  t.board_watts = limit > 0 ? std::min(limit, node.gpu.tdp_watts) : node.gpu.tdp_watts;
  return t;
}

std::vector<std::int64_t> gpu_counts(const CapacityTarget& target,
                                     const std::vector<std::int64_t>& requested,
                                     std::int64_t max_gpus) {
  const std::int64_t per_node = target.gpus_per_node;
  std::set<std::int64_t> counts;
  for (std::int64_t r : requested) counts.insert((r + per_node - 1) / per_node * per_node);
  if (requested.empty()) {
    for (std::int64_t nodes = 1; nodes * per_node <= max_gpus; nodes *= 2)
      counts.insert(nodes * per_node);
    if (counts.empty()) counts.insert(per_node);
  }
  return {counts.begin(), counts.end()};
}

CapacityRow plan_configuration(const models::ModelSpec& model, const PlanInput& input,
                               const CapacityTarget& target, std::int64_t gpus,
                               const CapacityOptions& options,
                               std::optional<double> price_per_gpu_hour) {
  CapacityRow row;
  row.gpus = gpus;
  row.nodes = gpus / target.gpus_per_node;
  const topo::Cluster cluster = topo::load_cluster(
      topo::ClusterRequest{target.cluster_spec, static_cast<int>(row.nodes), {}});
  const SearchSpace space(model, input, gpus);
  SearchResult result;
  try {
    result = run_search(model, space, cluster, options.search);
  } catch (const InfeasibleError& e) {  // valid plans, none fits
    row.reason = e.what();
    row.failure = ExitCode::INFEASIBLE;
    return row;
  } catch (const ValidationError& e) {  // no candidate is a valid plan at this count
    row.reason = e.what();
    row.failure = ExitCode::BAD_INPUT;
    return row;
  }
  if (result.ranked.empty()) {
    row.reason =
        fmt::format("the step simulator could not run the best plans: {}", result.first_failure);
    row.failure = ExitCode::INFEASIBLE;
    return row;
  }
  const SimulatedCandidate& best = result.ranked.front();
  row.plan = best.plan;
  row.step_time_s = best.report.step_time_s;
  row.tokens_per_s = best.report.tokens_per_s;
  row.mfu = best.report.mfu;
  row.peak_memory_bytes = best.report.memory.peak_bytes;
  const models::BytesPerParameter bytes = models::bytes_per_parameter(best.plan);
  row.checkpoint_bytes =
      models::count_parameters(model).total * (bytes.weights + bytes.optimizer());

  GoodputInputs goodput = options.goodput;
  goodput.checkpoint_bytes = row.checkpoint_bytes;
  row.run = expected_run(options.tokens / row.tokens_per_s, gpus, goodput);
  const double n = static_cast<double>(gpus);
  row.ideal_gpu_hours = n * row.run.ideal_s / SECONDS_PER_HOUR;
  if (!row.run.finishes()) {
    row.reason = fmt::format(
        "never finishes: a failure every {} on average, sooner than a restart ({}) plus half a "
        "checkpoint interval and write",
        format_time(row.run.mtbf_s), format_time(goodput.restart_s));
    row.failure = ExitCode::INFEASIBLE;
    return row;
  }
  row.feasible = true;
  row.gpu_hours = n * row.run.expected_s / SECONDS_PER_HOUR;
  row.energy_joules = target.board_watts * n * row.run.expected_s * options.pue;
  if (price_per_gpu_hour) row.cost = *price_per_gpu_hour * row.gpu_hours;
  return row;
}

std::vector<CapacityRow> plan_capacity(const models::ModelSpec& model, const PlanInput& input,
                                       const std::vector<CapacityTarget>& targets,
                                       const std::vector<std::int64_t>& requested,
                                       const std::vector<std::optional<double>>& prices,
                                       const CapacityOptions& options) {
  std::vector<std::pair<std::size_t, std::int64_t>> work;
  for (std::size_t t = 0; t < targets.size(); ++t)
    for (std::int64_t gpus : gpu_counts(targets[t], requested)) work.emplace_back(t, gpus);
  std::vector<CapacityRow> rows;
  for (std::size_t i = 0; i < work.size(); ++i) {
    const auto [t, gpus] = work[i];
    if (options.progress) options.progress(i, work.size());
    const std::optional<double> price = t < prices.size() ? prices[t] : std::nullopt;
    rows.push_back(plan_configuration(model, input, targets[t], gpus, options, price));
    rows.back().target = t;
  }
  return rows;
}

std::vector<std::optional<double>> resolve_prices(
    const std::vector<CapacityTarget>& targets,
    const std::vector<std::pair<std::string, std::string>>& prices, const std::string& field) {
  std::vector<std::optional<double>> out(targets.size());
  for (const auto& [name, text] : prices) {
    const double usd = parse_price(text, field, name);
    std::string gpu_key;
    if (is_gpu_name(name)) gpu_key = topo::find_gpu(name).name;
    bool matched = false;
    for (std::size_t t = 0; t < targets.size(); ++t) {
      const CapacityTarget& target = targets[t];
      if (name != target.label && name != target.gpu && gpu_key != target.gpu) continue;
      if (out[t]) {
        throw ValidationError(field, fmt::format("{} {}: a second price for {}; give one per GPU "
                                                 "type",
                                                 field, name, target.label));
      }
      out[t] = usd;
      matched = true;
    }
    if (!matched) {
      std::vector<std::string> labels;
      for (const CapacityTarget& target : targets) labels.push_back(target.label);
      const std::string guess = did_you_mean(name, labels);
      throw ValidationError(
          field, fmt::format("{} {}: not one of the GPU types planned ({}){}", field, name,
                             join(labels, ", "),
                             guess.empty() ? "" : fmt::format("; did you mean '{}'?", guess)));
    }
  }
  return out;
}

std::optional<std::size_t> cheapest_within(const std::vector<CapacityRow>& rows, double max_days,
                                           bool by_gpu_hours) {
  std::optional<std::size_t> best;
  const auto key = [&](const CapacityRow& r) {
    return std::make_pair(by_gpu_hours ? r.gpu_hours : r.cost.value_or(0), r.run.expected_s);
  };
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const CapacityRow& r = rows[i];
    if (!r.feasible || r.run.expected_s > max_days * SECONDS_PER_DAY) continue;
    if (!by_gpu_hours && !r.cost) continue;
    if (!best || key(r) < key(rows[*best])) best = i;
  }
  return best;
}

std::optional<std::size_t> fastest_within(const std::vector<CapacityRow>& rows, double budget) {
  std::optional<std::size_t> best;
  const auto key = [](const CapacityRow& r) { return std::make_pair(r.run.expected_s, *r.cost); };
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const CapacityRow& r = rows[i];
    if (!r.feasible || !r.cost || *r.cost > budget) continue;
    if (!best || key(r) < key(rows[*best])) best = i;
  }
  return best;
}

}  // namespace loom::strategies
