// replace_file(): every file loom writes replaces its path in one step (issue 34, item 9).
#include <doctest/doctest.h>
#include <sys/stat.h>  // umask (POSIX)

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/file_output.hpp"
#include "tests/temp_dir.hpp"

using namespace loom;
namespace fs = std::filesystem;

namespace {

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int entries(const fs::path& dir) {
  int n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

}  // namespace

TEST_CASE("common::replace_file: new, replaced, through a link, and refused") {
  const testing::TempDir dir("replace_file");
  const std::string path = dir.file("out.json");
  // A new file: the mode a plain create gives (0666 less the umask), nothing else left.
  const mode_t mask = ::umask(022);
  CHECK_FALSE(replace_file(path, "first").has_value());
  ::umask(mask);
  CHECK(read(path) == "first");
  CHECK(fs::status(path).permissions() == fs::perms(0644));
  // Replaced: the content and the file's own mode.
  fs::permissions(path, fs::perms(0600));
  CHECK_FALSE(replace_file(path, "second").has_value());
  CHECK(read(path) == "second");
  CHECK(fs::status(path).permissions() == fs::perms(0600));
  CHECK(entries(dir.path()) == 1);
  // A link is written through: the link stays, its target changes.
  const std::string link = dir.file("link.json");
  fs::create_symlink(path, link);
  CHECK_FALSE(replace_file(link, "third").has_value());
  CHECK(fs::is_symlink(link));
  CHECK(read(path) == "third");
  // A folder that does not exist: the system's reason, nothing written.
  const auto why = replace_file(dir.file("none/out.json"), "x");
  REQUIRE(why.has_value());
  CHECK(*why == "No such file or directory");
  CHECK(entries(dir.path()) == 2);
}
