// `loom calibrate`: measured figures into a profile and back out. `import` reads measurement
// files by their content (nccl-tests output, PyTorch profiler traces) into a versioned profile;
// `show` prints what a profile holds and where each figure came from; `shapes` lists the GEMM
// shapes a model under a plan runs, for `loom-harness gemm --shapes`. Commands that accept
// `--calibration PROFILE` use it where it has data (docs/calibration.md).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "cli/cmd_calibrate_fit.hpp"
#include "cli/cmd_calibrate_network.hpp"
#include "cli/commands.hpp"
#include "cli/plan_flags.hpp"
#include "common/dtype.hpp"
#include "common/error.hpp"
#include "common/table.hpp"
#include "common/units.hpp"
#include "models/flops.hpp"
#include "models/model_loader.hpp"
#include "models/plan_dtypes.hpp"
#include "sim/calibration/kernel_fit_profile.hpp"
#include "sim/calibration/nccl_tests.hpp"
#include "sim/calibration/profile.hpp"
#include "sim/collectives.hpp"
#include "strategies/plan/plan_json.hpp"
#include "strategies/plan/plan_rules.hpp"

namespace loom::cli {

namespace {

struct CalibrateFlags {
  std::vector<std::string> files;
  std::string output;
  std::string profile;
  std::string op;   // import: the collective of every table (empty: from the log)
  std::string gpu;  // show: the GPU the kernel fit takes defaults from (else the profile's)
};

struct ShapesFlags {
  std::string model;
  PlanFlags plan;
};

std::string plural(int n, const char* word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

// "3 collective tables", and the trace summaries when there are any.
std::string contents(const calibration::Profile& profile) {
  std::string text = plural(static_cast<int>(profile.collectives.size()), "collective table");
  if (!profile.traces.empty()) {
    text += ", " + plural(static_cast<int>(profile.traces.size()), "trace summary");
    if (profile.traces.size() != 1) text.replace(text.size() - 1, 1, "ies");
  }
  if (!profile.gemms.empty())
    text += ", " + plural(static_cast<int>(profile.gemms.size()), "GEMM shape");
  if (!profile.memory.empty())
    text += ", " + plural(static_cast<int>(profile.memory.size()), "memory size");
  return text;
}

// "NVIDIA H100 80GB HBM3, rank 0 of 8"
std::string device_of(const calibration::TraceSummary& t) {
  std::string text = t.gpu.empty() ? "GPU not named" : t.gpu;
  if (t.rank >= 0) text += fmt::format(", rank {}", t.rank);
  if (t.world_size > 0) text += fmt::format(" of {}", t.world_size);
  return text;
}

void print_trace_steps(const calibration::TraceSummary& t) {
  std::cout << fmt::format("\nKineto trace {}: {}, {}\n", t.source, device_of(t),
                           plural(static_cast<int>(t.steps.size()), "step"));
  if (t.steps.empty()) return;
  Table steps({"step", "wall(us)", "busy(us)", "activities"});
  for (const auto& step : t.steps) {
    int activities = 0;
    for (const auto& c : step.classes) activities += c.kernels;
    steps.add_row({step.name, fmt::format("{:.1f}", step.wall_seconds * 1e6),
                   fmt::format("{:.1f}", step.busy_seconds * 1e6), std::to_string(activities)});
  }
  std::cout << steps.render();
  double busy = 0;
  for (const auto& step : t.steps) busy += step.busy_seconds;
  busy /= static_cast<double>(t.steps.size());
  Table classes({"class (mean per step)", "activities", "time(us)", "of busy"});
  for (const auto& c : t.per_step()) {
    classes.add_row({c.name, fmt::format("{:.1f}", c.kernels),
                     fmt::format("{:.1f}", c.seconds * 1e6),
                     busy > 0 ? format_percent(c.seconds / busy) : "-"});
  }
  std::cout << "\n" << classes.render();
}

void print_trace_rates(const calibration::TraceSummary& t) {
  if (!t.gemms.empty()) {
    Table gemms({"GEMM op", "dtype", "batch", "m", "n", "k", "calls", "mean(us)", "TFLOP/s"});
    gemms.align_left(1);
    for (const auto& g : t.gemms) {
      gemms.add_row({g.op, g.dtype, std::to_string(g.batch), std::to_string(g.m),
                     std::to_string(g.n), std::to_string(g.k), std::to_string(g.calls),
                     fmt::format("{:.2f}", g.seconds / g.calls * 1e6),
                     fmt::format("{:.1f}", g.flops_per_second() / 1e12)});
    }
    std::cout << "\n" << gemms.render();
  }
  if (!t.collectives.empty()) {
    Table colls({"collective", "ranks", "dtype", "size(B)", "calls", "mean(us)", "busbw(GB/s)"});
    colls.align_left(2);
    for (const auto& c : t.collectives) {
      colls.add_row({sim::to_string(c.op), std::to_string(c.group_size), c.dtype,
                     fmt::format("{:.0f}", c.bytes), std::to_string(c.calls),
                     fmt::format("{:.2f}", c.seconds / c.calls * 1e6),
                     fmt::format("{:.2f}", c.bus_bytes_per_second() / 1e9)});
    }
    std::cout << "\n" << colls.render();
  }
  if (!t.copies.empty()) {
    Table copies({"copy", "calls", "bytes", "time(us)", "GB/s"});
    for (const auto& c : t.copies) {
      copies.add_row({c.kind, std::to_string(c.calls), fmt::format("{:.0f}", c.bytes),
                      fmt::format("{:.2f}", c.seconds * 1e6),
                      fmt::format("{:.2f}", c.bytes_per_second() / 1e9)});
    }
    std::cout << "\n" << copies.render();
  }
}

// The loom-harness GEMM and memory tables, with what the kernel model takes from them.
void print_kernel_measurements(const calibration::Profile& profile) {
  if (!profile.gemms.empty()) {
    std::cout << "\nGEMMs (loom-harness)\n";
    Table gemms({"dtype", "m", "n", "k", "time(us)", "min(us)", "max(us)", "spread", "samples",
                 "TFLOP/s", "algorithm"});
    gemms.align_left(0);
    gemms.align_left(10);
    const auto us = [](const std::optional<double>& s) {
      return s ? fmt::format("{:.2f}", *s * 1e6) : std::string("-");
    };
    for (const auto& g : profile.gemms) {
      gemms.add_row({std::string(to_string(g.dtype)), std::to_string(g.m), std::to_string(g.n),
                     std::to_string(g.k), fmt::format("{:.2f}", g.seconds * 1e6), us(g.min_seconds),
                     us(g.max_seconds), g.spread ? fmt::format("{:.3f}", *g.spread) : "-",
                     g.samples ? std::to_string(*g.samples) : "-",
                     fmt::format("{:.1f}", g.flops_per_second() / 1e12),
                     g.algorithm.empty() ? "-" : g.algorithm});
    }
    std::cout << gemms.render();
  }
  if (!profile.memory.empty()) {
    std::cout << "\nmemory kernels (loom-harness)\n";
    Table memory({"kernel", "bytes", "time(us)", "spread", "GB/s"});
    memory.align_left(0);
    for (const auto& m : profile.memory) {
      memory.add_row({m.kernel, fmt::format("{:.0f}", m.bytes),
                      fmt::format("{:.2f}", m.seconds * 1e6),
                      m.spread ? fmt::format("{:.3f}", *m.spread) : "-",
                      fmt::format("{:.2f}", m.bytes_per_second() / 1e9)});
    }
    std::cout << memory.render();
    if (const auto bw = calibration::measured_kernels(profile).memory_Bps) {
      std::cout << fmt::format("memory-bound kernels stream at {:.2f} GB/s (largest size)\n",
                               *bw / 1e9);
    }
  }
}

int run_import(const CalibrateFlags& f) {
  calibration::ImportOptions options;
  if (!f.op.empty()) {
    const std::vector<std::string> names = calibration::nccl_tests_op_names();
    if (std::find(names.begin(), names.end(), f.op) == names.end())
      throw ValidationError::unknown_name("--op", f.op, names);
    options.op = sim::parse_collective_op(f.op, "--op");
  }
  calibration::ImportResult imported = calibration::import_files(f.files, options);
  calibration::Profile profile;
  for (const auto& table : imported.tables) {
    const std::string how = !table.program.empty()            ? table.program
                            : !table.op_inferred_from.empty() ? "op inferred"
                                                              : "op from --op";
    std::cout << fmt::format("imported {} on {} over {} ({}): {} from {}\n",
                             sim::to_string(table.op), plural(table.group_size, "rank"),
                             plural(table.nodes, "node"), how,
                             plural(static_cast<int>(table.points.size()), "size"), table.source);
    calibration::add_table(profile, table);
  }
  for (auto& trace : imported.traces) {
    std::cout << fmt::format(
        "imported Kineto trace {} ({}): {}, {} GEMM shapes, {} collective sizes\n", trace.source,
        device_of(trace), plural(static_cast<int>(trace.steps.size()), "step"), trace.gemms.size(),
        trace.collectives.size());
    profile.traces.push_back(std::move(trace));
  }
  for (const auto& note : imported.notes) std::cout << "note: " << note << "\n";
  calibration::write_profile(profile, f.output);
  std::cout << fmt::format("wrote {} ({})\n", f.output, contents(profile));
  return 0;
}

// The kernel fit of a profile with kernel measurements (calibration/kernel_fit_profile.hpp).
void print_kernel_fit(const calibration::Profile& profile, const CalibrateFlags& f) {
  if (!calibration::has_kernel_samples(profile)) return;
  if (const auto gpu = calibration::profile_gpu(profile, f.gpu)) {
    std::cout << calibration::render_kernel_fit(
        calibration::fit_profile_kernels(profile, f.profile, *gpu, {}), *gpu);
  } else {
    std::cout << "\nkernel fit: the profile's device is not a catalog GPU; give --gpu NAME\n";
  }
}

int run_show(const CalibrateFlags& f) {
  const calibration::Profile profile = calibration::read_profile(f.profile);
  std::cout << fmt::format("# loom calibration profile {} (format version {}): {}\n", f.profile,
                           calibration::PROFILE_VERSION, contents(profile));
  for (const auto& t : profile.collectives) {
    std::cout << fmt::format("\n{} on {} over {}, {} ({}), from {}\n", sim::to_string(t.op),
                             plural(t.group_size, "rank"), plural(t.nodes, "node"),
                             t.gpu.empty() ? "GPU not named" : t.gpu,
                             t.program.empty() ? "program not named" : t.program, t.source);
    Table table(
        {"size(B)", "time(us)", "out-of-place(us)", "in-place(us)", "busbw(GB/s)", "source"});
    table.align_left(5);
    for (const auto& p : t.points) {
      const auto us = [](const std::optional<double>& s) {
        return s ? fmt::format("{:.2f}", *s * 1e6) : std::string("-");
      };
      const double busbw =
          p.bytes / p.seconds / 1e9 * sim::bus_bandwidth_factor(t.op, t.group_size);
      table.add_row({fmt::format("{:.0f}", p.bytes), fmt::format("{:.2f}", p.seconds * 1e6),
                     us(p.out_of_place_seconds), us(p.in_place_seconds),
                     fmt::format("{:.2f}", busbw), p.source});
    }
    std::cout << table.render();
  }
  for (const auto& trace : profile.traces) {
    print_trace_steps(trace);
    print_trace_rates(trace);
  }
  print_kernel_measurements(profile);
  print_kernel_fit(profile, f);
  if (profile.factors) std::cout << "\nfitted factors\n" << render_factors(*profile.factors);
  if (profile.network) std::cout << render_fitted_network(*profile.network);
  return 0;
}

// The GEMMs of one matmul op as the kernel model times them (topologies/kernel_model.cpp):
// forward C = A·B at (m, n, k); input gradient dA = dC·Bᵀ at (m, k, n); weight gradient
// dB = Aᵀ·dC at (k, n, m). Only passes with FLOPs run.
struct PassShape {
  const char* pass;
  std::int64_t m, n, k;
  double flops;
};

std::vector<PassShape> pass_shapes(const models::OpCost& op) {
  const models::MatmulShape& s = op.shape;
  std::vector<PassShape> passes = {{"fwd", s.m, s.n, s.k, op.fwd_flops},
                                   {"dgrad", s.m, s.k, s.n, op.bwd_input_flops},
                                   {"wgrad", s.k, s.n, s.m, op.bwd_weight_flops}};
  std::erase_if(passes, [](const PassShape& p) { return p.flops <= 0; });
  return passes;
}

// Every GEMM the model's ops run under the plan, deduplicated by (dtype, batch, m, n, k) in
// first-seen order, each with the ops and passes that run it, as shapes-file lines
// (harness/shapes.hpp): "m n k  dtype [xBATCH] op.pass ..."; adds each dtype to `dtypes`.
std::vector<std::string> shape_lines(const models::ModelSpec& model,
                                     const models::TrainingPlan& plan,
                                     std::vector<std::string>& dtypes) {
  std::vector<models::OpCost> ops = models::embedding_ops(model, plan);
  for (int layer = 0; layer < model.layers; ++layer) {
    for (auto& op : models::layer_ops(model, plan, layer)) ops.push_back(std::move(op));
  }
  for (auto& op : models::head_ops(model, plan)) ops.push_back(std::move(op));
  using Key = std::tuple<std::string, std::int64_t, std::int64_t, std::int64_t, std::int64_t>;
  std::map<Key, size_t> index;
  std::vector<std::pair<std::string, std::vector<std::string>>> rows;  // (shape, users)
  for (const auto& op : ops) {
    if (op.kind != models::OpKind::MATMUL) continue;
    // FP8 / NVFP4 plans run only Transformer Engine's linears in FP8 / FP4
    // (strategies/step/pass_cost.cpp).
    const DType compute = models::compute_dtype(plan.precision);
    const DType dtype =
        models::low_precision_linears(plan.precision) && !op.fp8_linear ? DType::BF16 : compute;
    for (const PassShape& p : pass_shapes(op)) {
      const std::string name = std::string(to_string(dtype));
      if (std::find(dtypes.begin(), dtypes.end(), name) == dtypes.end()) dtypes.push_back(name);
      const Key key{name, op.shape.batch, p.m, p.n, p.k};
      auto [it, added] = index.try_emplace(key, rows.size());
      if (added) {
        const std::string batch =
            op.shape.batch > 1 ? fmt::format(" x{}", op.shape.batch) : std::string();
        rows.push_back({fmt::format("{} {} {}  {}{}", p.m, p.n, p.k, name, batch), {}});
      }
      const std::string user = fmt::format("{}.{}", op.name, p.pass);
      auto& users = rows[it->second].second;
      if (std::find(users.begin(), users.end(), user) == users.end()) users.push_back(user);
    }
  }
  std::vector<std::string> lines;
  for (const auto& [shape, users] : rows)
    lines.push_back(fmt::format("{} {}", shape, fmt::join(users, " ")));
  return lines;
}

int run_shapes(ShapesFlags& f) {
  const models::ModelSpec model = models::load_model(f.model, "--model");
  const ResolvedPlan resolved = resolve_plan(f.plan, std::nullopt, model);
  const models::TrainingPlan& plan = resolved.plan;
  if (f.plan.print_config) {
    std::cout << strategies::render_plan_config(plan);
    return 0;
  }
  strategies::validate_plan(model, plan, std::nullopt, resolved.sources);
  std::vector<std::string> dtypes;
  const std::vector<std::string> lines = shape_lines(model, plan, dtypes);
  std::cout << fmt::format(
      "# loom calibrate shapes: GEMMs of {} on one GPU, one micro-batch (tp {} pp {} cp {} ep "
      "{}{}; mbs {} seq {}; {})\n",
      model.name, plan.tp, plan.pp, plan.cp, plan.ep, plan.sp ? " +sp" : "", plan.mbs, plan.seq,
      models::to_string(plan.precision));
  std::cout << fmt::format(
      "# measure: loom-harness gemm --shapes THIS_FILE --dtype {} -o gemm.json\n",
      fmt::join(dtypes, ","));
  std::cout << "# m n k  dtype [xBATCH: grouped GEMMs] op.pass (fwd: C = A.B; dgrad: dA = "
               "dC.B^T; wgrad: dB = A^T.dC)\n";
  for (const auto& line : lines) std::cout << line << "\n";
  return 0;
}

}  // namespace

Command add_calibrate_command(CLI::App& root) {
  auto flags = std::make_shared<CalibrateFlags>();
  auto shapes_flags = std::make_shared<ShapesFlags>();
  Command command;
  CLI::App* app = root.add_subcommand(
      "calibrate",
      "measured figures (nccl-tests logs, profiler traces) into a profile for --calibration");
  app->require_subcommand(1);
  CLI::App* import = app->add_subcommand(
      "import",
      "read measurement files (nccl-tests output, PyTorch profiler traces .json/.json.gz; "
      "recognised by content) into a profile");
  import->add_option("files", flags->files, "measurement files")->required();
  import->add_option("-o,--output", flags->output, "profile to write (JSON)")->required();
  import->add_option("--op", flags->op,
                     "the collective of every nccl-tests table (all_reduce, all_gather, ...): "
                     "for logs without the <op>_perf command line whose columns leave it open");
  CLI::App* show =
      app->add_subcommand("show", "print what a profile holds and where each figure came from");
  show->add_option("profile", flags->profile, "profile file")->required();
  show->add_option("--gpu", flags->gpu,
                   "GPU whose defaults the kernel fit starts from (default: the profile's device)");
  CLI::App* shapes = app->add_subcommand(
      "shapes",
      "the GEMM shapes (forward and both backward) a model runs under a plan, as a "
      "`loom-harness gemm --shapes` file");
  shapes
      ->add_option("--model", shapes_flags->model,
                   "preset (`loom presets models`), loom model JSON or HF config.json")
      ->required();
  add_plan_flags(*shapes, shapes_flags->plan);
  const Command fit = add_calibrate_fit(*app);
  const Command fit_network = add_calibrate_fit_network(*app);
  command.app = app;
  command.run = [flags, shapes_flags, import, show, shapes, fit, fit_network]() {
    if (import->parsed()) return run_import(*flags);
    if (show->parsed()) return run_show(*flags);
    if (shapes->parsed()) return run_shapes(*shapes_flags);
    if (fit.app->parsed()) return fit.run();
    if (fit_network.app->parsed()) return fit_network.run();
    return 2;
  };
  return command;
}

}  // namespace loom::cli
