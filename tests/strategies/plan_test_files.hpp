#pragma once
// A fresh temporary folder per test run for plan files (no fixed /tmp paths), removed at exit.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace loom::test {

/// Writes `text` to a file called `name` in this process's own temporary folder; returns its
/// path.
inline std::string write_temp_file(const std::string& name, const std::string& text) {
  struct Folder {
    std::filesystem::path path;
    Folder() {
      std::string pattern = (std::filesystem::temp_directory_path() / "loom_test_XXXXXX").string();
      path = mkdtemp(pattern.data());
    }
    ~Folder() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const Folder folder;
  const std::string path = (folder.path / name).string();
  std::ofstream(path) << text;
  return path;
}

}  // namespace loom::test
