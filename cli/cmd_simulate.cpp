// `loom simulate`: one training step of a model under a plan on a cluster, simulated on the
// discrete-event engine: step time, where it goes (compute, bubble, exposed communication),
// throughput, MFU/HFU and memory per stage; optionally a Chrome trace of the timeline.
#include <fmt/format.h>

#include <fstream>
#include <iostream>

#include "cli/cluster_flags.hpp"
#include "cli/commands.hpp"
#include "cli/memory_json.hpp"
#include "cli/plan_flags.hpp"
#include "common/document.hpp"
#include "common/error.hpp"
#include "common/table.hpp"
#include "common/units.hpp"
#include "models/model_loader.hpp"
#include "sim/calibration/profile.hpp"
#include "strategies/calibration/factor_fit.hpp"
#include "strategies/plan/plan_json.hpp"
#include "strategies/plan/plan_rules.hpp"
#include "strategies/step_simulator.hpp"
#include "topologies/measured_kernel_model.hpp"

namespace loom::cli {
namespace {

struct SimulateFlags {
  std::string model;
  ClusterFlags cluster;
  PlanFlags plan;
  std::string network = "flow";
  bool full = false;
  std::string format;
  std::string trace;
  std::string calibration;  // profile path; empty: the model alone
};

std::string pct(double x) {
  return fmt::format("{:.1f}%", 100.0 * x);
}

std::string render_table(const models::ModelSpec& model, const models::TrainingPlan& plan,
                         const topo::Cluster& cluster, const strategies::StepReport& r,
                         const SimulateFlags& f) {
  std::string out;
  out += fmt::format("model {} on {} ({} x {}), network {}, {} mode ({} GPU{} simulated)\n",
                     model.name, cluster.name, cluster.num_gpus(), cluster.gpu.name, f.network,
                     f.full ? "full" : "symmetric", r.simulated_gpus,
                     r.simulated_gpus == 1 ? "" : "s");
  if (!f.calibration.empty()) out += fmt::format("calibration profile {}\n", f.calibration);
  out += fmt::format(
      "plan: tp {} pp {} dp {} cp {}{}{}; mbs {} gbs {} ({} micro-batches) seq {}; {} zero {} "
      "recompute {} schedule {}\n\n",
      plan.tp, plan.pp, plan.dp, plan.cp, plan.vpp > 1 ? fmt::format(" vpp {}", plan.vpp) : "",
      plan.sp ? " +sp" : "", plan.mbs, plan.global_batch(), plan.micro_batches(), plan.seq,
      models::to_string(plan.precision), plan.zero, models::to_string(plan.recompute),
      models::to_string(plan.schedule));
  Table t({"metric", "value"});
  t.align_left(1);
  t.add_row({"step time", format_time(r.step_time_s)});
  t.add_row({"tokens/s", fmt::format("{:.0f}", r.tokens_per_s)});
  t.add_row({"model TFLOP/s per GPU", fmt::format("{:.1f}", r.model_tflops_per_gpu)});
  t.add_row({"hardware TFLOP/s per GPU", fmt::format("{:.1f}", r.hardware_tflops_per_gpu)});
  t.add_row({"MFU", pct(r.mfu)});
  t.add_row({"HFU", pct(r.hfu)});
  t.add_row({"pipeline bubble",
             fmt::format("{} ({})", format_time(r.bubble_time_s), pct(r.bubble_fraction))});
  t.add_row({"compute", format_time(r.compute_time_s)});
  t.add_row({"exposed communication", format_time(r.exposed_comm_time_s)});
  for (models::Dim d : models::REPORTED_COMM_DIMS) {
    const int k = models::index(d);
    t.add_row({fmt::format("communication {}", models::to_string(d)),
               fmt::format("{} ({} exposed)", format_time(r.comm_time_s[k]),
                           format_time(r.exposed_comm_s[k]))});
  }
  if (plan.dp > 1)
    t.add_row(
        {"dp volume per GPU", fmt::format("{} ({} collectives over all stages)",
                                          format_bytes(r.dp_bytes_per_gpu), r.dp_collectives)});
  t.add_row({"optimizer step", format_time(r.optimizer_time_s)});
  out += t.render();
  const double cap = cluster.gpu.hbm_bytes;
  out += "\nmemory per GPU:\n";
  Table mem(
      {"stage", "weights", "gradients", "optimizer", "activations", "other", "total", "fits"});
  for (const auto& s : r.memory.stages) {
    mem.add_row({std::to_string(s.stage), format_bytes(s.weights_bytes),
                 format_bytes(s.gradients_bytes), format_bytes(s.optimizer_bytes),
                 format_bytes(s.activations_bytes), format_bytes(s.other_bytes),
                 format_bytes(s.total_bytes), s.total_bytes <= cap ? "yes" : "NO"});
  }
  out += mem.render();
  out += fmt::format("peak {} of {} — {}\n", format_bytes(r.memory.peak_bytes), format_bytes(cap),
                     r.memory.peak_bytes <= cap ? "fits" : "does NOT fit");
  return out;
}

OrderedJson render_results(const strategies::StepReport& r, double capacity) {
  OrderedJson res;
  res["step_time_s"] = r.step_time_s;
  res["tokens_per_s"] = r.tokens_per_s;
  res["model_tflops_per_gpu"] = r.model_tflops_per_gpu;
  res["hardware_tflops_per_gpu"] = r.hardware_tflops_per_gpu;
  res["mfu"] = r.mfu;
  res["hfu"] = r.hfu;
  res["bubble_fraction"] = r.bubble_fraction;
  res["bubble_time_s"] = r.bubble_time_s;
  res["pipeline_time_s"] = r.pipeline_time_s;
  res["compute_time_s"] = r.compute_time_s;
  res["exposed_comm_time_s"] = r.exposed_comm_time_s;
  OrderedJson comm;
  for (models::Dim d : models::REPORTED_COMM_DIMS)
    comm[models::to_string(d)] = r.comm_time_s[models::index(d)];
  res["comm_time_s"] = comm;
  OrderedJson exposed;
  for (models::Dim d : models::REPORTED_COMM_DIMS)
    exposed[models::to_string(d)] = r.exposed_comm_s[models::index(d)];
  res["exposed_comm_time_s_by_kind"] = exposed;
  res["dp_bytes_per_gpu"] = r.dp_bytes_per_gpu;
  res["dp_collectives"] = r.dp_collectives;
  res["optimizer_time_s"] = r.optimizer_time_s;
  res["simulated_gpus"] = r.simulated_gpus;
  res["memory"] = memory_report_json(r.memory, capacity);
  return res;
}

// Chrome trace: one process per rank, one thread per stream; "X" slices in microseconds and
// "C" memory counters.
void write_trace(std::ofstream& out, const std::string& path, const strategies::StepReport& r) {
  OrderedJson events = OrderedJson::array();
  std::map<std::pair<int, std::string>, int> tids;
  for (const auto& s : r.timeline) {
    auto key = std::make_pair(s.rank, s.stream);
    if (!tids.count(key)) {
      const int tid = static_cast<int>(tids.size());
      tids[key] = tid;
      OrderedJson meta;
      meta["name"] = "thread_name";
      meta["ph"] = "M";
      meta["pid"] = s.rank;
      meta["tid"] = tid;
      meta["args"] = {{"name", s.stream}};
      events.push_back(meta);
    }
    OrderedJson e;
    e["name"] = s.name;
    e["cat"] = strategies::to_string(s.category);
    e["ph"] = "X";
    e["pid"] = s.rank;
    e["tid"] = tids[key];
    e["ts"] = s.start_s * 1e6;
    e["dur"] = (s.end_s - s.start_s) * 1e6;
    events.push_back(e);
  }
  for (const auto& m : r.memory_samples) {
    OrderedJson e;
    e["name"] = "memory";
    e["ph"] = "C";
    e["pid"] = m.rank;
    e["ts"] = m.time_s * 1e6;
    e["args"] = {{"bytes", m.bytes}};
    events.push_back(e);
  }
  OrderedJson doc;
  doc["traceEvents"] = events;
  doc["displayTimeUnit"] = "ms";
  out << dump_json(doc, -1) << "\n";
  close_output_file(out, path, "--trace");
}

// `options` with the profile's measured kernels, collectives and fitted factors (the factors
// scale the measured kernel model, as `calibrate fit` would fit them on top of it).
strategies::SimulateOptions calibrated(strategies::SimulateOptions options, const std::string& path,
                                       const topo::Cluster& cluster) {
  calibration::Profile profile = calibration::read_profile(path);
  if (calibration::has_kernel_measurements(profile)) {
    options.kernels = std::make_shared<topo::MeasuredKernelModel>(
        cluster.gpu, options.efficiency, calibration::measured_kernels(profile));
  }
  if (profile.factors) options = strategies::with_factors(options, *profile.factors, cluster);
  if (!profile.collectives.empty()) {
    options.collective_override =
        std::make_shared<calibration::MeasuredCollectives>(std::move(profile));
  }
  return options;
}

}  // namespace

Command add_simulate_command(CLI::App& root) {
  auto flags = std::make_shared<SimulateFlags>();
  Command command;
  CLI::App* app = root.add_subcommand(
      "simulate", "simulate one training step: step time, bubbles, MFU, comm, memory");
  command.app = app;
  app->add_option("--model", flags->model, "model preset, loom model JSON or HF config.json")
      ->required();
  add_cluster_flags(*app, flags->cluster, true);
  add_plan_flags(*app, flags->plan);
  app->add_option("--network", flags->network, "network model: flow|analytical|ideal")
      ->check(CLI::IsMember({"flow", "analytical", "ideal"}))
      ->capture_default_str();
  app->add_flag("--full", flags->full, "simulate every GPU (default: one per pipeline stage)");
  app->add_option("--trace", flags->trace, "write a Chrome/Perfetto trace JSON to FILE");
  app->add_option(
      "--calibration", flags->calibration,
      "calibration profile: measured GEMM times, memory bandwidth, collective times and "
      "fitted factors "
      "(docs/calibration.md)");
  add_format_flag(*app, flags->format, {"table", "json"});
  command.run = [flags]() -> int {
    const SimulateFlags& f = *flags;
    const models::ModelSpec model = models::load_model(f.model, "--model");
    const topo::Cluster cluster = resolve_cluster(f.cluster);
    const ResolvedPlan resolved = resolve_plan(f.plan, cluster.num_gpus(), model.layers);
    const models::TrainingPlan& plan = resolved.plan;
    if (f.plan.print_config) {
      std::cout << strategies::render_plan_config(plan);
      return 0;
    }
    strategies::validate_plan(model, plan, cluster.num_gpus(), resolved.sources);
    // Opened before the simulation: a bad path fails now, not after minutes of work.
    std::ofstream trace;
    if (!f.trace.empty()) trace = open_output_file(f.trace, "--trace");
    strategies::SimulateOptions options;
    options.network = sim::parse_network_mode(f.network, "--network");
    options.full = f.full;
    options.keep_timeline = !f.trace.empty();
    if (!f.calibration.empty()) options = calibrated(options, f.calibration, cluster);
    const strategies::StepReport r = strategies::simulate_step(model, plan, cluster, options);
    if (!f.trace.empty()) write_trace(trace, f.trace, r);
    if (parse_format(f.format) == Format::JSON) {
      OrderedJson context;
      context["model"] = model.name;
      context["cluster"] = cluster.name;
      context["gpus"] = cluster.num_gpus();
      context["network"] = f.network;
      context["mode"] = f.full ? "full" : "symmetric";
      context["plan"] = strategies::plan_to_json(plan);
      if (!f.calibration.empty()) context["calibration"] = f.calibration;
      std::cout << render_document(
          make_document(context, render_results(r, cluster.gpu.hbm_bytes)));
    } else {
      std::cout << render_table(model, plan, cluster, r, f);
    }
    return 0;
  };
  return command;
}

}  // namespace loom::cli
