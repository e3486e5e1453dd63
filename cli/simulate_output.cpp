#include "cli/simulate_output.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "cli/band_output.hpp"
#include "cli/memory_json.hpp"
#include "cli/plan_text.hpp"
#include "cli/simulate_scenarios.hpp"
#include "common/csv.hpp"
#include "common/table.hpp"
#include "common/units.hpp"
#include "strategies/plan/plan_json.hpp"
#include "strategies/step/zero_offload.hpp"

namespace loom::cli {
namespace {

std::string upper(std::string_view text) {
  std::string out(text);
  for (auto& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

double zero3_buffer_bytes(const models::MemoryReport& m) {
  double most = 0;
  for (const auto& s : m.stages) most = std::max(most, s.zero3_buffer_bytes);
  return most;
}

Table metrics_table(const models::TrainingPlan& plan, const strategies::StepReport& r) {
  Table t({"metric", "value"});
  t.align_left(1);
  for (const auto& [name, value] : metric_rows(plan, r)) t.add_row({name, value});
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
  t.add_row({plan.offload_optimizer == models::Offload::CPU ? "optimizer step (CPU Adam, host)"
                                                            : "optimizer step",
             format_time(r.optimizer_time_s)});
  return t;
}

// What the metrics mean, where a newcomer looks for it: under the table.
std::string notes(const models::TrainingPlan& plan, const strategies::StepReport& r) {
  const std::string bubble =
      plan.pp == 1 ? ""
                   : fmt::format(
                         "  pipeline bubble: idle time of the least idle stage between the "
                         "step's start and the end of\n"
                         "    the last forward/backward pass (the pipeline phase, {}), less its "
                         "waits for parameter\n"
                         "    gathers; the percentage is of that phase, not of the step.\n",
                         format_time(r.pipeline_time_s));
  return fmt::format(
      "\nnotes:\n"
      "  MFU, HFU: model FLOP/s per GPU (HFU: with recompute) over the GPU's dense {} peak.\n"
      "{}"
      "  exposed communication: communication the compute stream waits for, mean over "
      "stages:\n"
      "    tp, cp and ep collectives block it (all exposed, but what --tp-comm-overlap and\n"
      "    --overlap-moe-expert-parallel-comm hide); dp counts only while compute is idle; pp "
      "waits\n"
      "    are part of the bubble.\n",
      upper(to_string(r.peak_dtype)), bubble);
}

// A pipeline with fewer micro-batches than stages idles most of its phase; say so when the
// user may not know (GPipe, Huang et al. 2019, section 2.3: the bubble is negligible from
// M >= 4 x K micro-batches for K stages, hence the suggested --gbs).
std::string few_micro_batches_note(const models::TrainingPlan& plan,
                                   const strategies::StepReport& r) {
  const std::int64_t m = plan.micro_batches();
  if (plan.pp <= 1 || m >= plan.pp) return "";
  const std::int64_t suggested = 4 * plan.pp * plan.mbs * plan.dp;
  return fmt::format(
      "note: {} micro-batch{} for {} pipeline stages{}: the pipeline idles {} of its phase; set "
      "--gbs (e.g. --gbs {} for {} micro-batches of mbs {} x dp {})\n",
      m, m == 1 ? "" : "es", plan.pp,
      plan.gbs > 0 ? ""
                   : fmt::format(" (--gbs not given: gbs = mbs x dp = {})", plan.global_batch()),
      format_percent(r.bubble_fraction, 0), format_grouped(suggested), 4 * plan.pp, plan.mbs,
      plan.dp);
}

std::string memory_section(const strategies::StepReport& r, double cap,
                           std::pair<int, double> host) {
  std::string out = "\nmemory per GPU";
  const double zero3 = zero3_buffer_bytes(r.memory);
  out += zero3 > 0 ? fmt::format(" (weights include the ZeRO-3 gathered buffers, up to {}; ",
                                 format_bytes(zero3))
                   : " (";
  out += "other: CUDA context, comm buffers, fragmentation reserve):\n";
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
  out += host_memory_text(r.memory, host.first, host.second);
  return out;
}

// Each prediction's band from loom's track record (docs/simulate.md "Error bands").
std::string band_section(const PlanBands& b, const strategies::StepReport& r) {
  std::string out = "\nerror bands (loom's residuals on the published runs of its track record";
  if (const auto held = strategies::held_out_coverage(strategies::BandMetric::TIME))
    out += fmt::format("; {} of held-out runs fell inside their step-time band",
                       format_percent(*held, 0));
  out += "):\n";
  for (const auto& line : band_lines(b, r)) out += "  " + line + "\n";
  return out;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> metric_rows(const models::TrainingPlan& plan,
                                                             const strategies::StepReport& r) {
  std::string mfu = fmt::format("{} ({})", utilisation_text(r.mfu, r),
                                format_flop_rate(r.peak_flops) + " per GPU");
  if (plan.precision == models::Precision::FP32 && r.peak_dtype == DType::TF32)
    mfu += "; fp32 matmuls run on TF32 tensor cores";
  std::vector<std::pair<std::string, std::string>> rows = {
      {"step time", format_time(r.step_time_s)},
      {"tokens/s", fmt::format("{:.0f}", r.tokens_per_s)},
      {"tokens/s per GPU", fmt::format("{:.0f}", tokens_per_s_per_gpu(r.tokens_per_s, plan))},
      {"model TFLOP/s per GPU", fmt::format("{:.1f}", r.model_tflops_per_gpu)},
      {"hardware TFLOP/s per GPU", fmt::format("{:.1f}", r.hardware_tflops_per_gpu)},
      {"MFU", mfu},
      {"HFU", utilisation_text(r.hfu, r)},
      {"compute", format_time(r.compute_time_s)},
      {"exposed communication", format_time(r.exposed_comm_time_s)},
  };
  // Without a pipeline there is no bubble to report (the row would be 0 or a DP wait).
  if (plan.pp > 1) {
    rows.insert(rows.begin() + 7,
                {"pipeline bubble",
                 fmt::format("{} ({} of the {} pipeline phase)", format_time(r.bubble_time_s),
                             format_percent(r.bubble_fraction), format_time(r.pipeline_time_s))});
  }
  if (plan.cpu_offloading_num_layers > 0)
    rows.emplace_back("CPU offload waits", format_time(r.offload_wait_s));
  if (r.zero_offload) {
    rows.emplace_back(
        "host copies (DeepSpeed offload)",
        fmt::format("{} ({} per GPU to and from its host)", format_time(r.offload_copy_s),
                    format_bytes(r.offload_bytes_per_gpu)));
  }
  return rows;
}

std::vector<std::string> band_lines(const PlanBands& b, const strategies::StepReport& r) {
  auto tokens = [](double v) { return fmt::format("{:.0f}", v); };
  auto percent = [](double v) { return format_percent(v); };
  auto bytes = [](double v) { return format_bytes(v); };
  return {band_line("step time", r.step_time_s, b.time.of_time(r.step_time_s), b.time,
                    [](double v) { return format_time(v); }),
          band_line("tokens/s", r.tokens_per_s, b.time.of_rate(r.tokens_per_s), b.time, tokens),
          band_line("MFU", r.mfu, b.time.of_rate(r.mfu), b.time, percent),
          band_line("peak memory", r.memory.peak_bytes, b.memory.of_time(r.memory.peak_bytes),
                    b.memory, bytes)};
}

std::string utilisation_text(double fraction, const strategies::StepReport& r) {
  return fmt::format("{} of the {} dense peak", format_percent(fraction),
                     upper(to_string(r.peak_dtype)));
}

std::string render_simulate_table(const models::ModelSpec& model, const models::TrainingPlan& plan,
                                  const topo::Cluster& cluster, const strategies::StepReport& r,
                                  const SimulateSetup& setup) {
  const double cap = cluster.gpu.hbm_bytes;
  std::string out;
  const std::string misfit = misfit_text(r.memory, cap);
  if (!misfit.empty()) {
    out += fmt::format(
        "WARNING: the plan does not fit: {}; the step time below assumes it would "
        "(--require-fit exits 3 instead)\n",
        misfit);
  }
  std::string gpus = cluster.gpu.name;
  for (int k = 1; k < cluster.num_gpu_types(); ++k) gpus += "+" + cluster.gpu_type(k).name;
  out += fmt::format("model {} on {} ({} x {}), network {}, {} mode ({} GPU{} simulated)\n",
                     model.name, cluster.name, cluster.num_gpus(), gpus, setup.network,
                     setup.full ? "full" : "symmetric", r.simulated_gpus,
                     r.simulated_gpus == 1 ? "" : "s");
  if (!setup.calibration.empty()) out += fmt::format("calibration profile {}\n", setup.calibration);
  out += fmt::format("plan: {}\n", plan_summary(plan));
  if (setup.order != DEFAULT_ORDER) out += fmt::format("rank order: {}\n", setup.order);
  out += few_micro_batches_note(plan, r);
  out += "\n";
  out += metrics_table(plan, r).render();
  out += band_section(simulate_bands(model, plan, cluster), r);
  out += notes(plan, r);
  out += memory_section(r, cap,
                        {cluster.gpus_per_node(), strategies::node_host(cluster).memory_bytes});
  out += render_scenario_table(r);
  return out;
}

OrderedJson simulate_results_json(const models::TrainingPlan& plan, const strategies::StepReport& r,
                                  double capacity) {
  OrderedJson res;
  res["step_time_s"] = r.step_time_s;
  res["tokens_per_s"] = r.tokens_per_s;
  res["tokens_per_s_per_gpu"] = tokens_per_s_per_gpu(r.tokens_per_s, plan);
  res["model_tflops_per_gpu"] = r.model_tflops_per_gpu;
  res["hardware_tflops_per_gpu"] = r.hardware_tflops_per_gpu;
  res["mfu"] = r.mfu;
  res["hfu"] = r.hfu;
  res["peak_dtype"] = std::string(to_string(r.peak_dtype));
  res["peak_tflops_per_gpu"] = r.peak_flops / 1e12;
  res["bubble_fraction"] = r.bubble_fraction;
  res["bubble_time_s"] = r.bubble_time_s;
  res["pipeline_time_s"] = r.pipeline_time_s;
  res["compute_time_s"] = r.compute_time_s;
  res["exposed_comm_time_s"] = r.exposed_comm_time_s;
  if (r.cpu_offloading) res["offload_wait_time_s"] = r.offload_wait_s;
  if (r.zero_offload) {
    res["offload_copy_time_s"] = r.offload_copy_s;
    res["offload_bytes_per_gpu"] = r.offload_bytes_per_gpu;
  }
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
  add_scenario_json(res, r);
  return res;
}

PlanBands simulate_bands(const models::ModelSpec& model, const models::TrainingPlan& plan,
                         const topo::Cluster& cluster) {
  return plan_bands(model, plan, cluster.gpu.arch, cluster.num_gpus());
}

void add_simulate_bands(OrderedJson& results, const PlanBands& b, const strategies::StepReport& r) {
  results["step_time_s_band"] = band_pair(b.time.of_time(r.step_time_s));
  results["tokens_per_s_band"] = band_pair(b.time.of_rate(r.tokens_per_s));
  results["model_tflops_per_gpu_band"] = band_pair(b.time.of_rate(r.model_tflops_per_gpu));
  results["mfu_band"] = band_pair(b.time.of_rate(r.mfu));
  if (results.contains("memory"))
    results["memory"]["peak_bytes_band"] = band_pair(b.memory.of_time(r.memory.peak_bytes));
  results["bands"] = bands_json(b);
}

OrderedJson simulate_context_json(const models::ModelSpec& model, const models::TrainingPlan& plan,
                                  const topo::Cluster& cluster, const SimulateSetup& setup) {
  OrderedJson context;
  context["model"] = model.name;
  context["cluster"] = cluster.name;
  context["gpus"] = cluster.num_gpus();
  context["network"] = setup.network;
  context["mode"] = setup.full ? "full" : "symmetric";
  context["order"] = setup.order;
  context["plan"] = plan_output_json(plan);
  if (!setup.calibration.empty()) context["calibration"] = setup.calibration;
  return context;
}

std::string render_simulate_csv(const models::ModelSpec& model, const models::TrainingPlan& plan,
                                const topo::Cluster& cluster, const strategies::StepReport& r,
                                const SimulateSetup& setup) {
  // The plan's columns carry the GPU count ("gpus"), so the setup does not repeat it.
  std::vector<std::string> header = {"model", "cluster", "network", "mode", "calibration", "order"};
  std::vector<std::string> row = {model.name,        cluster.name,
                                  setup.network,     setup.full ? "full" : "symmetric",
                                  setup.calibration, setup.order};
  append_plan_columns(plan, header, row);
  auto add = [&](std::string key, std::string value) {
    header.push_back(std::move(key));
    row.push_back(std::move(value));
  };
  add("step_time_s", csv_number(r.step_time_s));
  add("tokens_per_s", csv_number(r.tokens_per_s));
  add("tokens_per_s_per_gpu", csv_number(tokens_per_s_per_gpu(r.tokens_per_s, plan)));
  add("model_tflops_per_gpu", csv_number(r.model_tflops_per_gpu));
  add("hardware_tflops_per_gpu", csv_number(r.hardware_tflops_per_gpu));
  add("mfu", csv_number(r.mfu));
  add("hfu", csv_number(r.hfu));
  add("peak_dtype", std::string(to_string(r.peak_dtype)));
  add("peak_tflops_per_gpu", csv_number(r.peak_flops / 1e12));
  add("bubble_fraction", csv_number(r.bubble_fraction));
  add("bubble_time_s", csv_number(r.bubble_time_s));
  add("pipeline_time_s", csv_number(r.pipeline_time_s));
  add("compute_time_s", csv_number(r.compute_time_s));
  add("exposed_comm_time_s", csv_number(r.exposed_comm_time_s));
  for (models::Dim d : models::REPORTED_COMM_DIMS)
    add(fmt::format("comm_time_s_{}", models::to_string(d)),
        csv_number(r.comm_time_s[models::index(d)]));
  for (models::Dim d : models::REPORTED_COMM_DIMS)
    add(fmt::format("exposed_comm_time_s_{}", models::to_string(d)),
        csv_number(r.exposed_comm_s[models::index(d)]));
  add("dp_bytes_per_gpu", csv_number(r.dp_bytes_per_gpu));
  add("dp_collectives", std::to_string(r.dp_collectives));
  add("optimizer_time_s", csv_number(r.optimizer_time_s));
  add("simulated_gpus", std::to_string(r.simulated_gpus));
  add("peak_memory_bytes", csv_number(r.memory.peak_bytes));
  add("peak_memory_stage", std::to_string(r.memory.peak_stage));
  add("capacity_bytes", csv_number(cluster.gpu.hbm_bytes));
  add("fits", r.memory.peak_bytes <= cluster.gpu.hbm_bytes ? "true" : "false");
  const PlanBands b = simulate_bands(model, plan, cluster);
  add_band_columns("step_time_s", b.time.of_time(r.step_time_s), header, row);
  add_band_columns("tokens_per_s", b.time.of_rate(r.tokens_per_s), header, row);
  add_band_columns("mfu", b.time.of_rate(r.mfu), header, row);
  add_band_columns("peak_memory_bytes", b.memory.of_time(r.memory.peak_bytes), header, row);
  add("band_runs", std::to_string(b.time.runs));
  add("band_extrapolation", b.time.extrapolation ? "true" : "false");
  CsvTable csv("simulate", 1, header);
  csv.add_row(row);
  return csv.render();
}

}  // namespace loom::cli
