#include "cli/commands.hpp"
#include "common/error.hpp"

namespace loom::cli {

// Placeholder until the topo subcommand lands.
Command add_topo_command(CLI::App& root) {
  Command command;
  command.app = root.add_subcommand("topo", "(not yet implemented)");
  command.run = []() -> int { throw InternalError("loom topo is not implemented yet"); };
  return command;
}

}  // namespace loom::cli
