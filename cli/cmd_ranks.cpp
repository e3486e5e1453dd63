#include "cli/commands.hpp"
#include "common/error.hpp"

namespace loom::cli {

// Placeholder until the ranks subcommand lands.
Command add_ranks_command(CLI::App& root) {
  Command command;
  command.app = root.add_subcommand("ranks", "(not yet implemented)");
  command.run = []() -> int { throw InternalError("loom ranks is not implemented yet"); };
  return command;
}

}  // namespace loom::cli
