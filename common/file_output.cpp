#include "common/file_output.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>  // write, fsync, close, unlink (POSIX)

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace loom {
namespace {

namespace fs = std::filesystem;

std::string reason(int error) {
  return std::strerror(error);
}

// Writes all of `content` to `fd`; returns 0 or the errno of the failure.
int write_all(int fd, std::string_view content) {
  while (!content.empty()) {
    const ssize_t n = ::write(fd, content.data(), content.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    content.remove_prefix(static_cast<size_t>(n));
  }
  return 0;
}

// Not a regular file: a device or FIFO the user named on purpose, written as it is.
std::optional<std::string> write_in_place(const std::string& path, std::string_view content) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) return reason(errno);
  const int error = write_all(fd, content);
  if (::close(fd) != 0 && error == 0) return reason(errno);
  if (error != 0) return reason(error);
  return std::nullopt;
}

mode_t create_mode() {
  const mode_t mask = ::umask(0);  // read the umask: the only way is to set it
  ::umask(mask);
  return 0666 & ~mask;
}

}  // namespace

std::optional<std::string> replace_file(const std::string& given, std::string_view content) {
  std::error_code ec;
  fs::path path = given;
  if (fs::is_symlink(fs::symlink_status(path, ec))) {
    const fs::path target = fs::weakly_canonical(path, ec);
    if (ec) return ec.message();
    path = target;
  }
  const fs::file_status status = fs::status(path, ec);
  const bool exists = !ec && fs::exists(status);
  if (exists && !fs::is_regular_file(status)) return write_in_place(path.string(), content);
  mode_t mode = create_mode();
  if (exists) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0) mode = st.st_mode & 07777;
  }
  fs::path dir = path.parent_path();
  if (dir.empty()) dir = ".";
  std::string name = path.filename().string();
  name.insert(0, 1, '.');  // hidden; not `"." + name`, which GCC 12 warns about (-Wrestrict)
  name += ".loom-XXXXXX";
  std::string temp = (dir / name).string();
  const int fd = ::mkstemp(temp.data());
  if (fd < 0) return reason(errno);
  int error = write_all(fd, content);
  if (error == 0 && ::fchmod(fd, mode) != 0) error = errno;
  if (error == 0 && ::fsync(fd) != 0) error = errno;  // on disk before it takes the name
  if (::close(fd) != 0 && error == 0) error = errno;
  if (error == 0 && ::rename(temp.c_str(), path.c_str()) != 0) error = errno;
  if (error != 0) {
    ::unlink(temp.c_str());
    return reason(error);
  }
  return std::nullopt;
}

}  // namespace loom
