#pragma once
// A fresh directory per test under the system temp dir (mkdtemp: unique even when CTest
// runs test binaries in parallel), removed with everything in it when the object dies.
// Tests never write to a fixed /tmp path.
#include <stdlib.h>  // mkdtemp (POSIX)

#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace loom::testing {

/// A unique temporary directory that lives as long as the object.
class TempDir {
 public:
  /// Creates <temp>/loom_<tag>_XXXXXX; throws std::runtime_error when it cannot.
  explicit TempDir(const std::string& tag) {
    std::string templ =
        (std::filesystem::temp_directory_path() / ("loom_" + tag + "_XXXXXX")).string();
    if (mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed: " + templ);
    path_ = templ;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  /// The directory.
  const std::filesystem::path& path() const { return path_; }
  /// The path of `name` inside the directory, as a string.
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace loom::testing
