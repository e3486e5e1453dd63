#include "cli/commands.hpp"
#include "common/error.hpp"

namespace loom::cli {

// Placeholder until the presets subcommand lands.
Command add_presets_command(CLI::App& root) {
  Command command;
  command.app = root.add_subcommand("presets", "(not yet implemented)");
  command.run = []() -> int { throw InternalError("loom presets is not implemented yet"); };
  return command;
}

}  // namespace loom::cli
