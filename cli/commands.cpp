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

std::ofstream open_output_file(const std::string& path, std::string_view flag) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    const int err = errno;
    throw ValidationError(std::string(flag),
                          fmt::format("{}: cannot create '{}' ({}); give a writable file path",
                                      flag, path, err ? std::strerror(err) : "unknown reason"));
  }
  return out;
}

void close_output_file(std::ofstream& out, const std::string& path, std::string_view flag) {
  out.flush();
  const int err = errno;
  out.close();
  if (!out) {
    throw ValidationError(std::string(flag),
                          fmt::format("{}: could not write all of '{}' ({}); free some space or "
                                      "give another path",
                                      flag, path, err ? std::strerror(err) : "write error"));
  }
}

}  // namespace loom::cli
