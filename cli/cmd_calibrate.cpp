// `loom calibrate`: measured figures into a profile and back out. `import` reads measurement
// files by their content (nccl-tests output, PyTorch profiler traces) into a versioned profile;
// `show` prints what a profile holds and where each figure came from. Commands that accept
// `--calibration PROFILE` use it where it has data (docs/calibration.md).
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/cmd_calibrate_fit.hpp"
#include "cli/commands.hpp"
#include "common/table.hpp"
#include "sim/calibration/nccl_tests.hpp"
#include "sim/calibration/profile.hpp"
#include "sim/collectives.hpp"

namespace loom::cli {

namespace {

struct CalibrateFlags {
  std::vector<std::string> files;
  std::string output;
  std::string profile;
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
                     busy > 0 ? fmt::format("{:.1f}%", 100 * c.seconds / busy) : "-"});
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
  calibration::ImportResult imported = calibration::import_files(f.files);
  calibration::Profile profile;
  for (const auto& table : imported.tables) {
    std::cout << fmt::format("imported {} on {} over {} ({}): {} from {}\n",
                             sim::to_string(table.op), plural(table.group_size, "rank"),
                             plural(table.nodes, "node"), table.program,
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
  if (profile.factors) std::cout << "\nfitted factors\n" << render_factors(*profile.factors);
  return 0;
}

}  // namespace

Command add_calibrate_command(CLI::App& root) {
  auto flags = std::make_shared<CalibrateFlags>();
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
  CLI::App* show =
      app->add_subcommand("show", "print what a profile holds and where each figure came from");
  show->add_option("profile", flags->profile, "profile file")->required();
  const Command fit = add_calibrate_fit(*app);
  command.app = app;
  command.run = [flags, import, show, fit]() {
    if (import->parsed()) return run_import(*flags);
    if (show->parsed()) return run_show(*flags);
    if (fit.app->parsed()) return fit.run();
    return 2;
  };
  return command;
}

}  // namespace loom::cli
