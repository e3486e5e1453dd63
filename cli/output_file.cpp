#include "cli/output_file.hpp"

#include <fmt/format.h>
#include <unistd.h>  // access (POSIX)

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "common/error.hpp"

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
    return;
  }
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  if (!fs::is_directory(dir, ec)) fail(flag, path, fmt::format("no directory {}", dir.string()));
  if (access(dir.c_str(), W_OK | X_OK) != 0)
    fail(flag, path, fmt::format("directory {}: {}", dir.string(), std::strerror(errno)));
}

void write_output_file(const std::string& path, std::string_view content, std::string_view flag) {
  // stdio rather than a stream: fclose reports a failed final flush (a full disk) with errno.
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) fail(flag, path, std::strerror(errno));
  const size_t written = std::fwrite(content.data(), 1, content.size(), file);
  const int write_errno = errno;
  const bool flushed = std::fflush(file) == 0;
  const int flush_errno = errno;
  const bool closed = std::fclose(file) == 0;
  if (written != content.size()) fail(flag, path, std::strerror(write_errno));
  if (!flushed) fail(flag, path, std::strerror(flush_errno));
  if (!closed) fail(flag, path, std::strerror(errno));
}

}  // namespace loom::cli
