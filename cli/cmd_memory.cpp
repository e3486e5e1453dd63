// `loom memory`: does it fit? Per-stage memory per GPU (weights, gradients, optimizer
// states, activations, other) of a model under a plan, against a GPU's capacity.
#include <fmt/format.h>

#include <iostream>
#include <optional>

#include "cli/band_output.hpp"
#include "cli/cluster_flags.hpp"
#include "cli/commands.hpp"
#include "cli/memory_json.hpp"
#include "cli/plan_flags.hpp"
#include "cli/plan_text.hpp"
#include "common/csv.hpp"
#include "common/document.hpp"
#include "common/error.hpp"
#include "common/table.hpp"
#include "common/units.hpp"
#include "models/model_loader.hpp"
#include "strategies/memory_plan.hpp"
#include "strategies/plan/plan_json.hpp"
#include "strategies/plan/plan_rules.hpp"
#include "strategies/step/zero_offload.hpp"
#include "topologies/gpu_catalog.hpp"

namespace loom::cli {
namespace {

struct MemoryOptions {
  std::string model;
  std::string gpu;
  ClusterFlags cluster;
  PlanFlags plan;
  std::string format;
  bool require_fit = false;
};

std::string layer_range(const std::vector<int>& layers) {
  if (layers.empty()) return "-";
  bool contiguous = layers.back() - layers.front() + 1 == static_cast<int>(layers.size());
  if (contiguous) return fmt::format("{}-{}", layers.front(), layers.back());
  return fmt::format("{} layers", layers.size());
}

std::string fmt_bpp(double value) {
  return fmt::format("{:.4g}", value);
}

std::string render_table(const models::ModelSpec& model, const models::TrainingPlan& plan,
                         const models::MemoryReport& r, const std::string& device,
                         std::optional<double> capacity, const topo::Cluster* cluster) {
  const models::ParameterCounts counts = models::count_parameters(model);
  std::string out;
  out += fmt::format("model {}: {} parameters", model.name, format_count(counts.total));
  if (model.is_moe()) out += fmt::format(" ({} active)", format_count(counts.active));
  out += fmt::format(", {} layers\n", model.layers);
  out += fmt::format("plan: {}\n", plan_summary(plan));
  if (capacity) out += fmt::format("device: {}, {} per GPU\n", device, format_bytes(*capacity));
  const models::BytesPerParameter& b = r.bytes_per_param;
  const double group = static_cast<double>(plan.dp) * plan.cp;
  const models::BytesPerParameter z = models::sharded_bytes_per_parameter(plan, plan.zero, group);
  std::string experts;
  if (model.is_moe() && plan.ep > 1) {
    const double expert_group = plan.expert_dp();
    experts = fmt::format(
        " (experts over dp x cp / ep = {}: {})", expert_group,
        fmt_bpp(models::sharded_bytes_per_parameter(plan, plan.zero, expert_group).total()));
  }
  out += fmt::format(
      "bytes/param: weights {}{} + gradients {} + optimizer {} (master {} + states {}) = {}; "
      "after ZeRO-{} over dp x cp = {}: {}{}\n\n",
      fmt_bpp(b.weights),
      b.fp8_cache > 0 ? fmt::format(" + fp8 cache {}", fmt_bpp(b.fp8_cache)) : "",
      fmt_bpp(b.gradients), fmt_bpp(b.optimizer()), fmt_bpp(b.master), fmt_bpp(b.states),
      fmt_bpp(b.total()), plan.zero, group, fmt_bpp(z.total()), experts);

  Table table({"stage", "layers", "params/GPU", "weights", "gradients", "optimizer", "activations",
               "other", "total", "capacity", "fits"});
  table.align_left(1);
  for (const auto& s : r.stages) {
    table.add_row({std::to_string(s.stage), layer_range(s.layers), format_count(s.parameters),
                   format_bytes(s.weights_bytes), format_bytes(s.gradients_bytes),
                   format_bytes(s.optimizer_bytes), format_bytes(s.activations_bytes),
                   format_bytes(s.other_bytes), format_bytes(s.total_bytes),
                   capacity ? format_bytes(*capacity) : "-",
                   capacity ? (s.total_bytes <= *capacity ? "yes" : "NO") : "-"});
  }
  out += table.render();

  out += "\nactivations (per GPU):\n";
  Table acts({"stage", "per micro-batch", "in flight", "embedding", "head", "logits+CE",
              "recompute", "total"});
  for (const auto& s : r.stages) {
    acts.add_row({std::to_string(s.stage), format_bytes(s.layer_activation_bytes),
                  fmt::format("{:.4g}", s.inflight_microbatches),
                  format_bytes(s.embedding_activation_bytes), format_bytes(s.head_activation_bytes),
                  format_bytes(s.logits_bytes), format_bytes(s.recompute_working_bytes),
                  format_bytes(s.activations_bytes)});
  }
  out += acts.render();
  if (plan.zero >= 3) {
    // The gathered buffers are weights (in the weights column), not "other".
    out += "\nweights (per GPU; ZeRO-3 gathers the largest unit and prefetches the next):\n";
    Table weights({"stage", "own shard", "ZeRO-3 gathered", "weights"});
    for (const auto& s : r.stages) {
      weights.add_row({std::to_string(s.stage),
                       format_bytes(s.weights_bytes - s.zero3_buffer_bytes),
                       format_bytes(s.zero3_buffer_bytes), format_bytes(s.weights_bytes)});
    }
    out += weights.render();
  }
  if (plan.cpu_offloading_num_layers > 0) {
    out += fmt::format(
        "\nCPU offloading ({} layers): {} of activations held in host memory per GPU, {} in "
        "transit on the GPU at most (in activations)\n",
        plan.cpu_offloading_num_layers, format_bytes(r.stages.front().offloaded_activation_bytes),
        format_bytes(r.stages.front().offload_buffer_bytes));
  }
  out += "\nother (per GPU):\n";
  Table other({"stage", "CUDA context", "comm buffers", "fragmentation", "other"});
  for (const auto& s : r.stages) {
    other.add_row({std::to_string(s.stage), format_bytes(s.other.cuda_context_bytes),
                   format_bytes(s.other.comm_buffer_bytes),
                   format_bytes(s.other.fragmentation_bytes), format_bytes(s.other_bytes)});
  }
  out += other.render();
  out += fmt::format("\npeak: stage {}, {}", r.peak_stage, format_bytes(r.peak_bytes));
  if (capacity) {
    out += r.peak_bytes <= *capacity
               ? fmt::format(" — fits ({} free)\n", format_bytes(*capacity - r.peak_bytes))
               : fmt::format(" — does NOT fit ({} over)\n", format_bytes(r.peak_bytes - *capacity));
  } else {
    out += " (give --gpu or --cluster to compare with a capacity)\n";
  }
  // DataParallel's GPU 0 and replicas, parameter-server workers (their servers: simulate).
  for (const auto& [device, bytes] : strategies::device_memory(r, plan))
    out += fmt::format("{}: {}\n", device, format_bytes(bytes));
  out += cluster ? host_memory_text(r, cluster->gpus_per_node(),
                                    strategies::node_host(*cluster).memory_bytes)
                 : host_memory_text(r);
  return out;
}

OrderedJson render_json_results(const models::ModelSpec& model, const models::TrainingPlan& plan,
                                const models::MemoryReport& r, std::optional<double> capacity) {
  OrderedJson res = memory_report_json(r, capacity);
  // The contract fields of each stage, then what `loom memory` adds.
  for (size_t i = 0; i < r.stages.size(); ++i) {
    const models::StageMemory& s = r.stages[i];
    OrderedJson& j = res["per_stage"][i];
    j["stage"] = s.stage;
    j["layers"] = s.layers.size();
    j["first_layer"] = s.layers.empty() ? -1 : s.layers.front();
    j["expert_parameters"] = s.expert_parameters;
    if (capacity) j["fits"] = s.total_bytes <= *capacity;
    OrderedJson acts;
    acts["layer_bytes_per_microbatch"] = s.layer_activation_bytes;
    acts["inflight_microbatches"] = s.inflight_microbatches;
    acts["embedding_bytes"] = s.embedding_activation_bytes;
    acts["head_bytes"] = s.head_activation_bytes;
    acts["logits_bytes"] = s.logits_bytes;
    acts["recompute_working_bytes"] = s.recompute_working_bytes;
    if (plan.cpu_offloading_num_layers > 0) {
      acts["offload_buffer_bytes"] = s.offload_buffer_bytes;
      acts["offloaded_host_bytes"] = s.offloaded_activation_bytes;
    }
    j["activations"] = acts;
    OrderedJson other;
    other["cuda_context_bytes"] = s.other.cuda_context_bytes;
    other["comm_buffer_bytes"] = s.other.comm_buffer_bytes;
    other["fragmentation_bytes"] = s.other.fragmentation_bytes;
    j["other"] = other;
    j["zero3_buffer_bytes"] = s.zero3_buffer_bytes;
  }
  OrderedJson devices = OrderedJson::array();
  for (const auto& [device, bytes] : strategies::device_memory(r, plan))
    devices.push_back({{"device", device}, {"bytes", bytes}});
  if (!devices.empty()) res["device_memory"] = devices;
  res["active_parameters"] = models::count_parameters(model).active;
  res["peak_stage"] = r.peak_stage;
  const models::BytesPerParameter& b = r.bytes_per_param;
  const double group = static_cast<double>(plan.dp) * plan.cp;
  OrderedJson bpp;
  bpp["weights"] = b.weights;
  bpp["fp8_cache"] = b.fp8_cache;
  bpp["gradients"] = b.gradients;
  bpp["master_weights"] = b.master;
  bpp["optimizer_states"] = b.states;
  bpp["total"] = b.total();
  bpp["after_zero"] = models::sharded_bytes_per_parameter(plan, plan.zero, group).total();
  res["bytes_per_parameter"] = bpp;
  return res;
}

// One record per pipeline stage: the model, device and plan, then the stage's bytes.
std::string render_csv(const models::ModelSpec& model, const models::TrainingPlan& plan,
                       const models::MemoryReport& r, const std::string& device,
                       std::optional<double> capacity) {
  std::vector<std::string> context_header = {"model", "device"};
  std::vector<std::string> context = {model.name, device};
  append_plan_columns(plan, context_header, context);
  std::vector<std::string> header = context_header;
  for (const char* key :
       {"stage", "first_layer", "layers", "parameters", "weights_bytes", "zero3_buffer_bytes",
        "gradients_bytes", "optimizer_bytes", "activations_bytes", "other_bytes", "total_bytes",
        "capacity_bytes", "fits"})
    header.push_back(key);
  CsvTable csv("memory", 1, header);
  for (const models::StageMemory& s : r.stages) {
    std::vector<std::string> row = context;
    for (const std::string& v :
         {std::to_string(s.stage), std::to_string(s.layers.empty() ? -1 : s.layers.front()),
          std::to_string(s.layers.size()), csv_number(s.parameters), csv_number(s.weights_bytes),
          csv_number(s.zero3_buffer_bytes), csv_number(s.gradients_bytes),
          csv_number(s.optimizer_bytes), csv_number(s.activations_bytes), csv_number(s.other_bytes),
          csv_number(s.total_bytes), capacity ? csv_number(*capacity) : std::string(),
          capacity ? (s.total_bytes <= *capacity ? "true" : "false") : std::string()})
      row.push_back(v);
    csv.add_row(std::move(row));
  }
  return csv.render();
}

int run_memory(MemoryOptions& o) {
  if (!o.gpu.empty() && !o.cluster.cluster.empty()) {
    throw ValidationError("--gpu", "--gpu and --cluster both name the GPU; give only one");
  }
  if (o.cluster.cluster.empty() && o.cluster.nodes) {
    throw ValidationError("--nodes", "--nodes needs --cluster; with --gpu give --gpus N");
  }
  if (o.require_fit && o.gpu.empty() && o.cluster.cluster.empty()) {
    throw ValidationError("--require-fit",
                          "--require-fit needs --gpu or --cluster: without a GPU there is no "
                          "capacity to fit");
  }
  if (o.cluster.gpus && *o.cluster.gpus < 1)
    throw ValidationError::not_positive("--gpus", std::to_string(*o.cluster.gpus));
  const models::ModelSpec model = load_plan_model(o.model, o.plan);
  std::optional<std::int64_t> gpus;
  std::optional<double> capacity;
  OrderedJson context;
  context["model"] = model.name;
  std::string device;
  std::optional<topo::Cluster> cluster_used;  // the precision rules run against its GPUs
  std::optional<topo::GpuSpec> gpu_used;
  if (!o.cluster.cluster.empty()) {
    const topo::Cluster& cluster = cluster_used.emplace(resolve_cluster(o.cluster));
    gpus = cluster.num_gpus();
    capacity = cluster.gpu.hbm_bytes;
    context["cluster"] = cluster.name;
    device = fmt::format("{} ({} GPUs of {})", cluster.name, cluster.num_gpus(),
                         cluster.gpu.display_name);
  } else if (!o.gpu.empty()) {
    const topo::GpuSpec& gpu = gpu_used.emplace(topo::find_gpu(o.gpu, "--gpu"));
    capacity = gpu.hbm_bytes;
    if (o.cluster.gpus) gpus = *o.cluster.gpus;
    context["gpu"] = gpu.name;
    device = gpu.display_name;
  } else if (o.cluster.gpus) {
    gpus = *o.cluster.gpus;
  }
  const ResolvedPlan resolved = resolve_plan(o.plan, gpus, model);
  const models::TrainingPlan& plan = resolved.plan;
  if (o.plan.print_config) {
    std::cout << strategies::render_plan_config(plan);
    return 0;
  }
  strategies::validate_plan(model, plan, gpus, resolved.sources);
  if (o.plan.emit) {
    print_emit(o.plan, model, plan);
    return 0;
  }
  // The GPU's precision rules (nvfp4 needs FP4 tensor cores, mxfp8 Blackwell, ...).
  if (cluster_used) {
    strategies::check_precision_on_cluster(plan, *cluster_used, resolved.sources);
    strategies::check_offload_cluster(plan, *cluster_used, resolved.sources);
  }
  if (gpu_used) strategies::check_precision_on_gpu(plan, *gpu_used, resolved.sources);
  const models::MemoryReport report = strategies::estimate_memory(model, plan);
  context["plan"] = plan_output_json(plan);
  const Format format = parse_format(o.format);
  if (format == Format::JSON) {
    OrderedJson results = render_json_results(model, plan, report, capacity);
    // The peak's band from loom's memory residuals, where the GPU (its generation) is known.
    std::optional<topo::GpuArch> arch;
    if (cluster_used) arch = cluster_used->gpu.arch;
    if (gpu_used) arch = gpu_used->arch;
    if (arch) {
      const PlanBands b = plan_bands(model, plan, *arch, plan.gpus());
      results["peak_bytes_band"] = band_pair(b.memory.of_time(report.peak_bytes));
      results["bands"] = bands_json(b);
    }
    std::cout << render_document(make_document(context, std::move(results)));
  } else if (format == Format::CSV) {
    std::cout << render_csv(model, plan, report, device, capacity);
  } else {
    std::cout << render_table(model, plan, report, device, capacity,
                              cluster_used ? &*cluster_used : nullptr);
  }
  if (o.require_fit && capacity) require_fit(model, plan, report, *capacity);
  return 0;
}

}  // namespace

Command add_memory_command(CLI::App& root) {
  auto options = std::make_shared<MemoryOptions>();
  Command command;
  CLI::App* app =
      root.add_subcommand("memory",
                          "per-GPU memory of every pipeline stage: weights, gradients, optimizer, "
                          "activations, other; does it fit?");
  app->add_option("--model", options->model,
                  "preset (`loom presets models`), loom model JSON or HF config.json (or the "
                  "shape in --megatron-args)");
  app->add_option("--gpu", options->gpu, "GPU to compare with (`loom presets gpus`)");
  add_cluster_flags(*app, options->cluster, false);
  add_plan_flags(*app, options->plan);
  add_emit_flag(*app, options->plan);
  add_format_flag(*app, options->format, {"table", "json", "csv"});
  app->add_flag("--require-fit", options->require_fit,
                "exit 3 when the peak stage does not fit the GPU");
  command.app = app;
  command.run = [options]() { return run_memory(*options); };
  return command;
}

}  // namespace loom::cli
