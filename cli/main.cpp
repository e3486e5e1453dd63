// The loom executable: parses the subcommand, runs it, and is the only place that turns
// loom::Error into one line on stderr and an exit code.
#include <fmt/format.h>

#include <iostream>
#include <optional>
#include <string_view>
#include <vector>

#include "cli/commands.hpp"
#include "cli/error_line.hpp"
#include "cli/parse_errors.hpp"
#include "common/error.hpp"
#include "common/strings.hpp"
#include "common/version.hpp"

namespace {

// One line on stderr (cli/error_line.hpp), and the exit code.
int fail(const std::string& message, loom::ExitCode code) {
  std::cerr << loom::cli::error_line("error", message);
  return static_cast<int>(code);
}

// The first argument must be a subcommand. CLI11 would take an unknown one for a stray
// positional and blame the next flag ("unknown flag '--model'"); this says what is wrong.
std::optional<std::string> check_subcommand(int argc, char** argv, const CLI::App& root) {
  std::vector<std::string> names;
  for (const CLI::App* sub : root.get_subcommands({})) names.push_back(sub->get_name());
  const std::string valid = loom::join(names, ", ");
  if (argc < 2) return fmt::format("no subcommand given; valid: {}; see `loom --help`", valid);
  const std::string first = argv[1];
  if (first == "-h" || first == "--help" || first == "--help-all" || first == "--version")
    return std::nullopt;
  if (first.rfind("-", 0) == 0) {
    return fmt::format(
        "'{}' comes before a subcommand; give one first (valid: {}), e.g. `loom "
        "simulate {} ...`",
        first, valid, first);
  }
  for (const auto& name : names)
    if (name == first) return std::nullopt;
  const std::string suggestion = loom::did_you_mean(first, names);
  return fmt::format("unknown subcommand '{}'{}; valid: {}", first,
                     suggestion.empty() ? "" : fmt::format(" (did you mean '{}'?)", suggestion),
                     valid);
}

// A command's exit code, unless its output did not all reach stdout (a full disk): then 2.
int finish_output(int code) {
  std::cout.flush();
  if (std::cout) return code;
  return fail(
      "could not write all of the output to standard output (a full disk or a closed "
      "pipe); free some space or redirect it elsewhere",
      loom::ExitCode::BAD_INPUT);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App root{
      "loom: discrete-event cluster simulator and memory/communication cost model "
      "for distributed deep-learning training"};
  root.set_version_flag("--version", std::string("loom ") + loom::VERSION);
  root.require_subcommand(1);
  std::vector<loom::cli::Command> commands = {
      loom::cli::add_simulate_command(root),   loom::cli::add_memory_command(root),
      loom::cli::add_collective_command(root), loom::cli::add_topo_command(root),
      loom::cli::add_ranks_command(root),      loom::cli::add_presets_command(root),
      loom::cli::add_calibrate_command(root),  loom::cli::add_search_command(root),
      loom::cli::add_plan_command(root),
  };
  if (const auto problem = check_subcommand(argc, argv, root))
    return fail(*problem, loom::ExitCode::BAD_INPUT);
  try {
    root.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return root.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return root.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return root.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail(loom::cli::explain_parse_error(e, root), loom::ExitCode::BAD_INPUT);
  } catch (const loom::Error& e) {
    return fail(e.what(), e.exit_code());
  }
  try {
    for (const auto& command : commands) {
      if (command.app->parsed()) return finish_output(command.run());
    }
    return fail("no subcommand given; see `loom --help`", loom::ExitCode::BAD_INPUT);
  } catch (const loom::Error& e) {
    return fail(e.what(), e.exit_code());
  } catch (const std::exception& e) {
    return fail(std::string("internal error (a bug in loom): ") + e.what(),
                loom::ExitCode::INTERNAL);
  }
}
