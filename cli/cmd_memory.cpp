#include "cli/commands.hpp"
#include "common/error.hpp"

namespace loom::cli {

// Placeholder until the memory subcommand lands.
Command add_memory_command(CLI::App& root) {
  Command command;
  command.app = root.add_subcommand("memory", "(not yet implemented)");
  command.run = []() -> int { throw InternalError("loom memory is not implemented yet"); };
  return command;
}

}  // namespace loom::cli
