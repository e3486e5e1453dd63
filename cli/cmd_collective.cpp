#include "cli/commands.hpp"
#include "common/error.hpp"

namespace loom::cli {

// Placeholder until the collective subcommand lands.
Command add_collective_command(CLI::App& root) {
  Command command;
  command.app = root.add_subcommand("collective", "(not yet implemented)");
  command.run = []() -> int { throw InternalError("loom collective is not implemented yet"); };
  return command;
}

}  // namespace loom::cli
