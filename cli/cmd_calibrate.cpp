// `loom calibrate`: measured figures into a profile and back out. `import` reads measurement
// files by their content (nccl-tests output in this release) into a versioned profile;
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
  for (const auto& note : imported.notes) std::cout << "note: " << note << "\n";
  calibration::write_profile(profile, f.output);
  std::cout << fmt::format(
      "wrote {} ({})\n", f.output,
      plural(static_cast<int>(profile.collectives.size()), "collective table"));
  return 0;
}

int run_show(const CalibrateFlags& f) {
  const calibration::Profile profile = calibration::read_profile(f.profile);
  std::cout << fmt::format(
      "# loom calibration profile {} (format version {}): {}\n", f.profile,
      calibration::PROFILE_VERSION,
      plural(static_cast<int>(profile.collectives.size()), "collective table"));
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
  if (profile.factors) std::cout << "\nfitted factors\n" << render_factors(*profile.factors);
  return 0;
}

}  // namespace

Command add_calibrate_command(CLI::App& root) {
  auto flags = std::make_shared<CalibrateFlags>();
  Command command;
  CLI::App* app = root.add_subcommand(
      "calibrate", "measured figures (nccl-tests logs) into a profile for --calibration");
  app->require_subcommand(1);
  CLI::App* import = app->add_subcommand(
      "import", "read measurement files (nccl-tests output, recognised by content) into a profile");
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
