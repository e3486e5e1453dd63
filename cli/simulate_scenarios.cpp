#include "cli/simulate_scenarios.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <set>

#include "common/error.hpp"
#include "common/limits.hpp"
#include "common/strings.hpp"
#include "common/table.hpp"
#include "common/units.hpp"
#include "strategies/plan/plan_fields.hpp"
#include "strategies/step/host_launch.hpp"

namespace loom::cli {
namespace {

using strategies::StepReport;

// The decimal number `text` spells (the whole of it), or NaN. std::from_chars, not std::stod:
// stod also takes hexadecimal ("0x10"), leading blanks and the current locale's decimal point.
double number(const std::string& text) {
  double v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v, std::chars_format::general);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nan("");
  return v;
}

// "FRACTION:MEAN" of a random model on `flag`.
std::pair<double, double> fraction_and_mean(const std::string& flag, const std::string& text) {
  const size_t colon = text.find(':');
  const double f = number(text.substr(0, colon));
  const double m = colon == std::string::npos ? std::nan("") : number(text.substr(colon + 1));
  if (!(f >= 0 && f <= 1) || !(m >= 1) || !std::isfinite(m)) {
    throw ValidationError::bad_value(
        flag, text,
        "FRACTION:MEAN_FACTOR, a fraction in [0, 1] and a mean factor >= 1, e.g. 0.05:1.5");
  }
  return {f, m};
}

// Every RANK=FACTOR of the --straggler values (each may be a comma list).
std::map<int, double> stragglers(const std::vector<std::string>& values) {
  std::map<int, double> out;
  for (const std::string& value : values) {
    size_t begin = 0;
    while (begin <= value.size()) {
      const size_t end = std::min(value.find(',', begin), value.size());
      const std::string item = value.substr(begin, end - begin);
      const size_t eq = item.find('=');
      const double rank = number(item.substr(0, eq));
      const double factor = eq == std::string::npos ? std::nan("") : number(item.substr(eq + 1));
      if (!(rank >= 0 && rank < 1e9) || rank != static_cast<int>(rank) || !(factor >= 1) ||
          !std::isfinite(factor)) {
        throw ValidationError::bad_value("--straggler", item,
                                         "RANK=FACTOR with a rank >= 0 and a factor >= 1 (2 = "
                                         "twice as slow), e.g. 3=1.5");
      }
      out[static_cast<int>(rank)] = factor;
      begin = end + 1;
    }
  }
  return out;
}

// "A:B=FACTOR": the duplex link between vertices A and B slowed FACTOR times.
void slow_link(topo::Cluster& cluster, const std::string& text) {
  const size_t eq = text.rfind('='), colon = text.find(':');
  const double factor = eq == std::string::npos ? std::nan("") : number(text.substr(eq + 1));
  if (colon == std::string::npos || colon > eq || !(factor >= 1) || !std::isfinite(factor)) {
    throw ValidationError::bad_value("--slow-link", text,
                                     "A:B=FACTOR, two vertex names (`loom topo --path`) and a "
                                     "factor >= 1, e.g. node1/nic0:leaf0=4");
  }
  const std::string a = text.substr(0, colon), b = text.substr(colon + 1, eq - colon - 1);
  const topo::VertexId va = cluster.find_vertex(a), vb = cluster.find_vertex(b);
  for (const auto& [name, v] : {std::pair{a, va}, std::pair{b, vb}}) {
    if (v < 0) {
      throw ValidationError("--slow-link",
                            fmt::format("--slow-link: no vertex '{}' in the cluster; "
                                        "`loom topo --format dot` names them",
                                        name));
    }
  }
  for (topo::LinkId l : cluster.out_links(va)) {
    if (cluster.link(l).to != vb) continue;
    cluster.slow_link(l, factor);
    return;
  }
  throw ValidationError("--slow-link",
                        fmt::format("--slow-link: '{}' and '{}' share no link; `loom topo --path` "
                                    "shows the links on a route",
                                    a, b));
}

std::string factor_text(double f) {
  return fmt::format("{:.2f}x", f);
}

}  // namespace

void add_scenario_flags(CLI::App& app, ScenarioFlags& f) {
  app.add_option("--steps", f.steps, "steps to simulate one after another (mean, p50, p99)")
      ->capture_default_str();
  app.add_option("--straggler", f.stragglers,
                 "RANK=FACTOR: that GPU computes FACTOR times slower in every step (repeat or "
                 "comma-separate)");
  app.add_option("--straggler-random", f.straggler_random,
                 "FRACTION:MEAN: each step each GPU is slow with probability FRACTION, by 1 + an "
                 "exponential of mean MEAN - 1");
  app.add_option("--slow-link", f.slow_links,
                 "A:B=FACTOR: the link between vertices A and B has 1/FACTOR of its bandwidth");
  app.add_option("--slow-link-random", f.slow_link_random,
                 "FRACTION:MEAN: each scale-out link is slow with probability FRACTION, by 1 + an "
                 "exponential of mean MEAN - 1");
  // Checked as text: CLI11 would read 2^64, 1e23 or -1 as 2^64 - 1.
  app.add_option("--seed", f.seed, "seed of the random straggler and slow-link draws")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            std::uint64_t value = 0;
            const char* end = text.data() + text.size();
            const auto [ptr, ec] = std::from_chars(text.data(), end, value);
            if (text.empty() || ec != std::errc() || ptr != end) {
              return fmt::format(
                  "invalid value '{}'; allowed: a whole number from 0 to 2^64 - 1 "
                  "(18446744073709551615)",
                  printable(text, MAX_ECHO_BYTES));
            }
            return "";
          },
          "UINT"))
      ->capture_default_str();
  app.add_option(
      "--host-launch", f.host_launch,
      fmt::format("host time per eager kernel launch (the host's speed: TE's expert-block host "
                  "time scales with it): a layer's pass takes at least its launches (not "
                  "CUDA-graphed ones); DataParallel: launches under the GIL (default: the GPU's "
                  "host, host_op_time: {:g}us on Xeon HGX/DGX boards, {:g}us on Grace, else "
                  "{:g}us)",
                  topo::XEON_HOST_OP_S * 1e6, topo::GRACE_HOST_OP_S * 1e6,
                  strategies::REFERENCE_HOST_LAUNCH_S * 1e6));
  app.add_option("--compare", f.compare,
                 "KEY=VALUE: also simulate the plan with one plan flag changed, e.g. "
                 "dp-mode=ddp, and print both");
}

void apply_scenario_flags(const ScenarioFlags& f, topo::Cluster& cluster,
                          strategies::SimulateOptions& options) {
  if (f.steps < 1 || f.steps > strategies::MAX_STEPS) {
    throw ValidationError::bad_value(
        "--steps", std::to_string(f.steps),
        fmt::format("a whole number from 1 to {}", strategies::MAX_STEPS));
  }
  options.steps = f.steps;
  options.stragglers = stragglers(f.stragglers);
  for (const auto& [rank, factor] : options.stragglers) {
    if (rank >= cluster.num_gpus()) {
      throw ValidationError("--straggler",
                            fmt::format("--straggler: rank {} is out of range; the cluster has "
                                        "ranks 0..{}",
                                        rank, cluster.num_gpus() - 1));
    }
    (void)factor;
  }
  if (!f.straggler_random.empty()) {
    const auto [fraction, mean] = fraction_and_mean("--straggler-random", f.straggler_random);
    options.random_stragglers = {fraction, mean, f.seed};
  }
  if (!f.host_launch.empty()) options.host_launch_s = parse_time(f.host_launch, "--host-launch");
  for (const std::string& s : f.slow_links) slow_link(cluster, s);
  if (!f.slow_link_random.empty()) {
    const auto [fraction, mean] = fraction_and_mean("--slow-link-random", f.slow_link_random);
    topo::slow_random_links(cluster, fraction, mean, f.seed);
  }
  cluster.finalize();
}

PlanFlags compare_flags(const PlanFlags& flags, const std::string& compare) {
  const size_t eq = compare.find('=');
  const std::string key = compare.substr(0, eq);
  const std::string value = eq == std::string::npos ? "" : compare.substr(eq + 1);
  const std::string flag = "--" + key;
  const strategies::PlanField* field = nullptr;
  for (const strategies::PlanField* f : strategies::plan_flag_fields()) {
    const std::string all = "," + std::string(f->flags) + ",";
    if (all.find("," + flag + ",") != std::string::npos) field = f;
  }
  if (eq == std::string::npos || value.empty() || field == nullptr) {
    throw ValidationError::bad_value("--compare", compare,
                                     "KEY=VALUE with KEY a plan flag without its dashes, e.g. "
                                     "dp-mode=ddp or zero=1");
  }
  PlanFlags out = flags;
  const std::string k(field->key);
  using strategies::FieldType;
  switch (field->type) {
    case FieldType::SIZE:
    case FieldType::STAGE: {
      // As the flag itself takes it: "8k" = 8192 where the field has binary suffixes.
      if (field->binary_suffix) {
        out.integers[k] = parse_binary_count(value, "--compare " + key);
        break;
      }
      const double v = number(value);
      if (!(std::abs(v) < 1e18) || v != static_cast<double>(static_cast<std::int64_t>(v)))
        throw ValidationError::bad_value("--compare", compare, "a whole number after '='");
      out.integers[k] = static_cast<std::int64_t>(v);
      break;
    }
    case FieldType::PERCENT: {
      const double v = number(value);
      if (!std::isfinite(v))
        throw ValidationError::bad_value("--compare", compare, "a number after '='");
      out.numbers[k] = v;
      break;
    }
    case FieldType::SWITCH:
      if (value != "on" && value != "off")
        throw ValidationError::bad_value("--compare", compare, "on or off after '='");
      out.switches[k] = value == "on" ? 1 : -1;
      break;
    case FieldType::DERIVED:
      throw ValidationError::bad_value("--compare", compare, "a plan flag that is not derived");
    default:
      out.texts[k] = value;
  }
  // Settings that only mean something under the first plan's design go with it.
  if (k == "cuda_graphs" && value == "off") out.texts.erase("cuda_graph_scope");
  if (k == "dp_mode" && value != "ps") {
    for (const strategies::PlanField& f : strategies::plan_fields()) {
      if (!strategies::is_ps_field(f.key)) continue;
      out.texts.erase(std::string(f.key));
      out.integers.erase(std::string(f.key));
    }
  }
  return out;
}

std::string render_scenario_table(const StepReport& r) {
  std::string out;
  const auto& ss = r.steps;
  if (ss.times_s.size() > 1) {
    out += fmt::format("\n{} steps: mean {}, p50 {}, p99 {}\n", ss.times_s.size(),
                       format_time(ss.mean_s), format_time(ss.p50_s), format_time(ss.p99_s));
    if (ss.times_s.size() <= 16) {
      Table t({"step", "time", "ended at"});
      for (size_t k = 0; k < ss.times_s.size(); ++k)
        t.add_row({std::to_string(k), format_time(ss.times_s[k]), format_time(ss.ends_s[k])});
      out += t.render();
    }
  }
  std::set<std::string> gpus;
  bool slowed = false;
  for (const auto& rt : r.replicas) {
    gpus.insert(rt.gpu);
    slowed = slowed || rt.compute_factor != 1.0;
  }
  for (const auto& st : r.stages) gpus.insert(st.gpu);
  if (gpus.size() > 1 || slowed || !r.design.breakdown.empty()) {
    out += "\nsimulated replicas (data-parallel workers):\n";
    Table t({"replica", "rank", "gpu", "factor", "compute (step 0)", "mean step", "finished"});
    for (const auto& rt : r.replicas)
      t.add_row({std::to_string(rt.replica), std::to_string(rt.rank), rt.gpu,
                 factor_text(rt.compute_factor), format_time(rt.compute_s),
                 format_time(rt.mean_step_s), format_time(rt.finish_s)});
    out += t.render();
  }
  if (gpus.size() > 1 || slowed) {
    out += "\npipeline stages (representative):\n";
    Table t({"stage", "gpu", "compute", "busy"});
    for (const auto& st : r.stages)
      t.add_row(
          {std::to_string(st.stage), st.gpu, format_time(st.compute_s), format_time(st.busy_s)});
    out += t.render();
  }
  const auto& d = r.design;
  if (!d.breakdown.empty()) {
    out += "\nwhere the time goes (data-parallel design, first step):\n";
    Table t({"phase", "time"});
    for (const auto& [what, s] : d.breakdown) t.add_row({what, format_time(s)});
    out += t.render();
  }
  if (d.ps_bytes_per_worker_step > 0)
    out += fmt::format("\nparameter-server traffic per worker per step: {}\n",
                       format_bytes(d.ps_bytes_per_worker_step));
  if (!d.staleness_histogram.empty()) {
    std::string hist;
    for (size_t s = 0; s < d.staleness_histogram.size(); ++s)
      if (d.staleness_histogram[s] > 0) hist += fmt::format(" {}:{}", s, d.staleness_histogram[s]);
    out += fmt::format("staleness (updates behind, gradients):{}; mean {:.2f}\n", hist,
                       d.staleness_mean);
  }
  if (!d.device_memory.empty()) {
    out += "\nmemory by device:\n";
    Table t({"device", "total"});
    for (const auto& [device, bytes] : d.device_memory) t.add_row({device, format_bytes(bytes)});
    out += t.render();
  }
  return out;
}

void add_scenario_json(OrderedJson& res, const StepReport& r) {
  OrderedJson steps;
  steps["count"] = r.steps.times_s.size();
  steps["mean_s"] = r.steps.mean_s;
  steps["p50_s"] = r.steps.p50_s;
  steps["p99_s"] = r.steps.p99_s;
  OrderedJson rows = OrderedJson::array();
  for (size_t k = 0; k < r.steps.times_s.size(); ++k)
    rows.push_back({{"step", k}, {"time_s", r.steps.times_s[k]}, {"end_s", r.steps.ends_s[k]}});
  steps["rows"] = rows;
  res["steps"] = steps;
  OrderedJson replicas = OrderedJson::array();
  for (const auto& rt : r.replicas) {
    replicas.push_back({{"replica", rt.replica},
                        {"rank", rt.rank},
                        {"gpu", rt.gpu},
                        {"compute_factor", rt.compute_factor},
                        {"compute_s", rt.compute_s},
                        {"mean_step_s", rt.mean_step_s},
                        {"finish_s", rt.finish_s}});
  }
  res["replicas"] = replicas;
  OrderedJson stages = OrderedJson::array();
  for (const auto& st : r.stages)
    stages.push_back(
        {{"stage", st.stage}, {"gpu", st.gpu}, {"compute_s", st.compute_s}, {"busy_s", st.busy_s}});
  res["stages"] = stages;
  const auto& d = r.design;
  if (d.breakdown.empty() && d.device_memory.empty() && d.staleness_histogram.empty()) return;
  OrderedJson design;
  OrderedJson breakdown = OrderedJson::array();
  for (const auto& [what, s] : d.breakdown) breakdown.push_back({{"phase", what}, {"seconds", s}});
  design["breakdown"] = breakdown;
  if (d.ps_bytes_per_worker_step > 0)
    design["ps_bytes_per_worker_step"] = d.ps_bytes_per_worker_step;
  if (!d.staleness_histogram.empty())
    design["staleness"] = {{"histogram", d.staleness_histogram}, {"mean", d.staleness_mean}};
  OrderedJson mem = OrderedJson::array();
  for (const auto& [device, bytes] : d.device_memory)
    mem.push_back({{"device", device}, {"bytes", bytes}});
  design["device_memory"] = mem;
  res["design"] = design;
}

std::string render_compare_table(const StepReport& a, const std::string& a_name,
                                 const StepReport& b, const std::string& b_name,
                                 std::int64_t a_gpus, std::int64_t b_gpus) {
  Table t({"metric", a_name, b_name});
  t.align_left(1);
  t.align_left(2);
  auto time_row = [&](const std::string& what, double x, double y) {
    t.add_row({what, format_time(x), format_time(y)});
  };
  time_row("step time", a.step_time_s, b.step_time_s);
  t.add_row(
      {"tokens/s", fmt::format("{:.0f}", a.tokens_per_s), fmt::format("{:.0f}", b.tokens_per_s)});
  t.add_row({"tokens/s per GPU",
             fmt::format("{:.0f}", a.tokens_per_s / static_cast<double>(a_gpus)),
             fmt::format("{:.0f}", b.tokens_per_s / static_cast<double>(b_gpus))});
  t.add_row({"MFU", format_percent(a.mfu), format_percent(b.mfu)});
  time_row("compute", a.compute_time_s, b.compute_time_s);
  time_row("exposed communication", a.exposed_comm_time_s, b.exposed_comm_time_s);
  time_row("optimizer step", a.optimizer_time_s, b.optimizer_time_s);
  t.add_row({"peak memory per GPU", format_bytes(a.memory.peak_bytes),
             format_bytes(b.memory.peak_bytes)});
  // The designs' own phases, in first-seen order.
  std::vector<std::string> names;
  for (const auto* r : {&a, &b})
    for (const auto& [what, s] : r->design.breakdown)
      if (std::find(names.begin(), names.end(), what) == names.end()) names.push_back(what);
  auto phase = [](const StepReport& r, const std::string& what) -> std::string {
    for (const auto& [w, s] : r.design.breakdown)
      if (w == what) return format_time(s);
    return "-";
  };
  for (const std::string& n : names) t.add_row({n, phase(a, n), phase(b, n)});
  return t.render();
}

}  // namespace loom::cli
