#include "cli/commands.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "common/error.hpp"

namespace loom::cli {

void add_format_flag(CLI::App& app, std::string& target, const std::vector<std::string>& allowed) {
  target = allowed.front();
  app.add_option("--format", target, "output format")
      ->check(CLI::IsMember(allowed))
      ->capture_default_str();
}

Format parse_format(const std::string& text) {
  if (text == "json") return Format::JSON;
  if (text == "csv") return Format::CSV;
  if (text == "dot") return Format::DOT;
  if (text == "table") return Format::TABLE;
  throw ValidationError::unknown_name("--format", text, {"table", "json", "csv", "dot"});
}

}  // namespace loom::cli
