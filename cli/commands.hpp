#pragma once
// Every subcommand registers itself on the root CLI11 app and returns the function that
// runs it after parsing. One file per subcommand: cmd_<name>.cpp.
#include <CLI/CLI.hpp>

#include <fstream>
#include <functional>
#include <string>
#include <string_view>

namespace loom::cli {

/// A registered subcommand: its CLI11 app and what to run when it was chosen.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Command add_memory_command(CLI::App& root);
Command add_presets_command(CLI::App& root);
Command add_topo_command(CLI::App& root);
Command add_ranks_command(CLI::App& root);
Command add_collective_command(CLI::App& root);
Command add_simulate_command(CLI::App& root);
Command add_calibrate_command(CLI::App& root);
Command add_search_command(CLI::App& root);
Command add_plan_command(CLI::App& root);

/// Output formats shared by the subcommands.
enum class Format { TABLE, JSON, CSV, DOT };
/// Adds `--format` with the given allowed names ("table", "json", ...).
void add_format_flag(CLI::App& app, std::string& target, const std::vector<std::string>& allowed);
/// Parses a --format value already checked by CLI11.
Format parse_format(const std::string& text);

}  // namespace loom::cli
