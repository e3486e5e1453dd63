#include "cli/commands.hpp"
#include "common/error.hpp"

namespace loom::cli {

// Placeholder until the simulate subcommand lands.
Command add_simulate_command(CLI::App& root) {
  Command command;
  command.app = root.add_subcommand("simulate", "(not yet implemented)");
  command.run = []() -> int { throw InternalError("loom simulate is not implemented yet"); };
  return command;
}

}  // namespace loom::cli
