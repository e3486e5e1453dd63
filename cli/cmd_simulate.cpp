// `loom simulate`: one training step of a model under a plan on a cluster, simulated on the
// discrete-event engine: step time, where it goes (compute, bubble, exposed communication),
// throughput, MFU/HFU and memory per stage; optionally a Chrome trace of the timeline.
#include <fmt/format.h>

#include <iostream>
#include <optional>

#include "cli/chrome_trace.hpp"
#include "cli/cluster_flags.hpp"
#include "cli/cmd_calibrate_network.hpp"
#include "cli/commands.hpp"
#include "cli/field_flags.hpp"
#include "cli/memory_json.hpp"
#include "cli/ops_output.hpp"
#include "cli/output_file.hpp"
#include "cli/plan_flags.hpp"
#include "cli/plan_text.hpp"
#include "cli/progress.hpp"
#include "cli/report_html.hpp"
#include "cli/simulate_output.hpp"
#include "cli/simulate_scenarios.hpp"
#include "common/document.hpp"
#include "common/error.hpp"
#include "models/model_loader.hpp"
#include "sim/calibration/kernel_fit_profile.hpp"
#include "sim/calibration/profile.hpp"
#include "strategies/calibration/factor_fit.hpp"
#include "strategies/memory_plan.hpp"
#include "strategies/plan/plan_json.hpp"
#include "strategies/plan/plan_rules.hpp"
#include "strategies/rank_layout.hpp"
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
  std::optional<std::string> report;  // --report FILE.html
  std::string calibration;            // profile path; empty: the model alone
  std::string order = DEFAULT_ORDER;
  bool require_fit = false;
  bool ops = false;        // --ops: the op lists' breakdown instead of the step
  ScenarioFlags scenario;  // steps, stragglers, slow links, --compare
};

// `options` with the profile's measured kernels, collectives and fitted factors (the factors
// scale the measured kernel model, as `calibrate fit` would fit them on top of it); `used`
// says which of them the kernel model took, for the report.
strategies::SimulateOptions calibrated(strategies::SimulateOptions options, const std::string& path,
                                       const topo::Cluster& cluster, KernelCalibration& used,
                                       std::optional<calibration::KernelFitUse>& fit_use) {
  calibration::Profile profile = calibration::read_profile(path);
  // Kernel measurements time kernels through the model's fitted parameters
  // (calibration/kernel_fit_profile.hpp), measured shapes as measured.
  if (calibration::has_kernel_samples(profile)) {
    fit_use.emplace();
    options.kernels =
        calibration::fitted_kernel_model(profile, path, cluster.gpu, options.efficiency, *fit_use);
    used.measured = true;
  }
  if (profile.factors) {
    options = strategies::with_factors(options, *profile.factors, cluster);
    used.scales = calibration::kernel_scales(*profile.factors);
  }
  if (!profile.collectives.empty()) {
    options.collective_override =
        std::make_shared<calibration::MeasuredCollectives>(std::move(profile));
  }
  return options;
}

// --compare KEY=VALUE: the same run with one plan flag changed, side by side.
int compare(const models::ModelSpec& model, const topo::Cluster& cluster, const SimulateFlags& f,
            const models::TrainingPlan& plan, const strategies::StepReport& r,
            const strategies::SimulateOptions& options, const SimulateSetup& setup) {
  const ResolvedPlan other =
      resolve_plan(compare_flags(f.plan, f.scenario.compare), cluster.num_gpus(), model);
  strategies::validate_plan_on_cluster(model, other.plan, cluster, other.sources);
  strategies::SimulateOptions o = options;
  o.keep_timeline = false;
  o.trace_collectives = false;
  o.progress = nullptr;
  const strategies::StepReport b = strategies::simulate_step(model, other.plan, cluster, o);
  if (parse_format(f.format) == Format::JSON) {
    OrderedJson context;
    context["model"] = model.name;
    context["cluster"] = cluster.name;
    context["compare"] = f.scenario.compare;
    OrderedJson results;
    results["plan"] = simulate_results_json(plan, r, cluster.gpu.hbm_bytes);
    results["plan"]["plan"] = plan_output_json(plan);
    results["compared"] = simulate_results_json(other.plan, b, cluster.gpu.hbm_bytes);
    results["compared"]["plan"] = plan_output_json(other.plan);
    std::cout << render_document(make_document(context, results));
    return 0;
  }
  if (parse_format(f.format) == Format::CSV)
    throw ValidationError("--compare",
                          "--compare: --format csv is not supported; use table or json");
  std::cout << render_simulate_table(model, plan, cluster, r, setup);
  std::cout << fmt::format("\ncompared with {}:\n", f.scenario.compare);
  std::cout << render_compare_table(r, "this plan", b, f.scenario.compare, plan.gpus(),
                                    other.plan.gpus());
  return 0;
}

// --ops: every op of the plan's distinct op lists, timed as the step would time them.
int print_ops(const models::ModelSpec& model, const models::TrainingPlan& plan,
              const topo::Cluster& cluster, const strategies::SimulateOptions& options,
              const SimulateSetup& setup, Format format) {
  const auto lists = strategies::op_breakdown(model, plan, cluster, options);
  if (format == Format::JSON)
    std::cout << render_document(
        make_document(simulate_context_json(model, plan, cluster, setup), ops_results_json(lists)));
  else if (format == Format::CSV)
    std::cout << render_ops_csv(lists);
  else
    std::cout << render_ops_table(lists);
  return 0;
}

int run_simulate(const SimulateFlags& f) {
  // Output paths are checked before the simulation: a bad path fails now, not after minutes.
  if (!f.trace.empty()) check_output_path(f.trace, "--trace");
  if (f.report) check_output_path(*f.report, "--report");
  const models::ModelSpec model = load_plan_model(f.model, f.plan);
  // A plan that cannot run on the GPUs asked for is refused before a large cluster is built.
  if (const auto gpus = planned_gpus(f.cluster); gpus && !f.plan.print_config) {
    const ResolvedPlan early = resolve_plan(f.plan, *gpus, model);
    strategies::validate_plan(model, early.plan, *gpus, early.sources);
  }
  topo::Cluster cluster = resolve_cluster(f.cluster);
  const ResolvedPlan resolved = resolve_plan(f.plan, cluster.num_gpus(), model);
  const models::TrainingPlan& plan = resolved.plan;
  if (f.plan.print_config) {
    std::cout << strategies::render_plan_config(plan);
    return 0;
  }
  strategies::validate_plan_on_cluster(model, plan, cluster, resolved.sources);
  if (f.plan.emit) {
    print_emit(f.plan, model, plan);
    return 0;
  }
  const Format format = parse_format(f.format);
  // The order is checked (and normalised) before the step is simulated.
  SimulateSetup setup{f.network, f.full, f.calibration,
                      strategies::RankLayout(plan, f.order, flag_names()).order()};
  // Memory is known before the simulation: a plan that does not fit is refused (exit 3)
  // under --require-fit, and warned about otherwise.
  const models::MemoryReport memory = strategies::estimate_memory(model, plan);
  if (f.require_fit) require_fit(model, plan, memory, cluster.gpu.hbm_bytes);
  const std::string misfit = misfit_text(memory, cluster.gpu.hbm_bytes);
  // The step's table says so at its top; --ops and the other formats warn on stderr.
  if (!misfit.empty() && (format != Format::TABLE || f.ops))
    std::cerr << "loom: warning: the plan does not fit: " << misfit << "\n";
  strategies::SimulateOptions options;
  options.network = sim::parse_network_mode(f.network, "--network");
  options.full = f.full;
  options.keep_timeline = !f.trace.empty() || f.report.has_value();
  options.trace_collectives = !f.trace.empty();  // the report does not draw them
  options.order = setup.order;
  apply_scenario_flags(f.scenario, cluster, options);
  KernelCalibration kernel_calibration;
  std::optional<calibration::KernelFitUse> fit_use;
  if (!f.calibration.empty())
    options = calibrated(options, f.calibration, cluster, kernel_calibration, fit_use);
  if (fit_use && format != Format::JSON)
    std::cerr << "loom: note: " << calibration::kernel_fit_use_text(*fit_use) << "\n";
  std::optional<NetworkCalibration> network;
  if (!f.calibration.empty())
    network = apply_fitted_network(f.calibration, cluster, options, format == Format::JSON);
  if (f.ops) return print_ops(model, plan, cluster, options, setup, format);
  ProgressBar progress = ProgressBar::on_stderr("loom simulate");
  progress.phase("simulating the step");
  options.progress = [&progress](double done) { progress.update(done); };
  const strategies::StepReport r = strategies::simulate_step(model, plan, cluster, options);
  progress.clear();
  if (!f.trace.empty()) write_chrome_trace(f.trace, r, plan, setup.order);
  if (f.report) {
    const ReportInputs inputs{model, plan,      resolved.sources, cluster,           options,
                              r,     f.network, f.calibration,    kernel_calibration};
    write_output_file(*f.report, render_html_report(inputs), "--report");
  }
  if (!f.scenario.compare.empty()) return compare(model, cluster, f, plan, r, options, setup);
  if (format == Format::JSON) {
    OrderedJson context = simulate_context_json(model, plan, cluster, setup);
    if (fit_use) context["kernel_fit"] = calibration::kernel_fit_use_json(*fit_use);
    if (network)
      context["calibration"] = coverage_json(
          f.calibration, network->network,
          plan_coverage(network->network, plan, setup.order, cluster), network->notes);
    OrderedJson results = simulate_results_json(plan, r, cluster.gpu.hbm_bytes);
    add_simulate_bands(results, simulate_bands(model, plan, cluster), r);
    std::cout << render_document(make_document(std::move(context), std::move(results)));
  } else if (format == Format::CSV) {
    std::cout << render_simulate_csv(model, plan, cluster, r, setup);
  } else {
    std::cout << render_simulate_table(model, plan, cluster, r, setup);
    if (network)
      std::cout << "\n"
                << coverage_note(plan_coverage(network->network, plan, setup.order, cluster));
  }
  return 0;
}

}  // namespace

Command add_simulate_command(CLI::App& root) {
  auto flags = std::make_shared<SimulateFlags>();
  Command command;
  CLI::App* app = root.add_subcommand(
      "simulate", "simulate one training step: step time, bubbles, MFU, comm, memory");
  command.app = app;
  app->add_option("--model", flags->model,
                  "model preset, loom model JSON or HF config.json (or the shape in "
                  "--megatron-args)");
  add_cluster_flags(*app, flags->cluster, true);
  add_plan_flags(*app, flags->plan);
  add_emit_flag(*app, flags->plan);
  add_order_flag(*app, flags->order);
  add_scenario_flags(*app, flags->scenario);
  app->add_option("--network", flags->network, "network model: flow|analytical|ideal")
      ->check(CLI::IsMember({"flow", "analytical", "ideal"}))
      ->capture_default_str();
  app->add_flag("--full", flags->full, "simulate every GPU (default: one per pipeline stage)");
  app->add_option("--trace", flags->trace, "write a Chrome/Perfetto trace JSON to FILE")
      ->check(output_path_check());
  app->add_option("--report", flags->report,
                  "write a self-contained HTML report (timeline, memory, communication, plan, "
                  "assumptions) to FILE");
  app->add_option(
      "--calibration", flags->calibration,
      "calibration profile: measured GEMM times, memory bandwidth, collective times and "
      "fitted factors "
      "(docs/calibration.md)");
  app->add_flag("--require-fit", flags->require_fit,
                "exit 3 without simulating when the peak stage does not fit the GPU");
  CLI::Option* ops = app->add_flag(
      "--ops", flags->ops,
      "print every op of each distinct layer (and the embedding and head) with its kernel time "
      "per pass, launches and collective, instead of simulating the step");
  // What --ops does not simulate cannot be asked of it.
  for (const char* other :
       {"--trace", "--report", "--compare", "--full", "--steps", "--straggler",
        "--straggler-random", "--slow-link", "--slow-link-random", "--seed", "--network"})
    ops->excludes(other);
  add_format_flag(*app, flags->format, {"table", "json", "csv"});
  command.run = [flags]() { return run_simulate(*flags); };
  return command;
}

}  // namespace loom::cli
