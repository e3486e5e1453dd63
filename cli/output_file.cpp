#include "cli/output_file.hpp"

#include <fmt/format.h>
#include <unistd.h>  // access (POSIX)

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "common/error.hpp"
#include "common/file_output.hpp"

namespace loom::cli {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(std::string_view flag, const std::string& path, std::string_view reason) {
  throw ValidationError::bad_value(flag, path, fmt::format("a writable file path ({})", reason));
}

}  // namespace

void check_output_path(const std::string& path, std::string_view flag) {
  if (path.empty()) fail(flag, path, "the path is empty");
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory)
    fail(flag, path, ec.message());  // too long, a loop of links, a component not a directory
  if (fs::exists(st)) {
    if (fs::is_directory(st)) fail(flag, path, "it is a directory");
    if (access(path.c_str(), W_OK) != 0) fail(flag, path, std::strerror(errno));
    if (!fs::is_regular_file(st)) return;  // /dev/null, a FIFO: written in place
  }
  // The file is replaced through a temporary file beside it: its folder must be writable.
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  if (!fs::is_directory(dir, ec)) fail(flag, path, fmt::format("no directory {}", dir.string()));
  if (access(dir.c_str(), W_OK | X_OK) != 0)
    fail(flag, path, fmt::format("directory {}: {}", dir.string(), std::strerror(errno)));
}

CLI::Validator output_path_check() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        return path.empty() ? "invalid value ''; allowed: a writable file path (the path is empty)"
                            : "";
      },
      "FILE");
}

void write_output_file(const std::string& path, std::string_view content, std::string_view flag) {
  if (path.empty()) fail(flag, path, "the path is empty");
  if (const auto why = replace_file(path, content)) fail(flag, path, *why);
}

}  // namespace loom::cli
