#pragma once
// Runs the loom binary for the CLI tests of hostile inputs (issues 11 and 34): stdout, stderr
// and the exit status, under a 60 s timeout so that a regression that hangs fails instead of
// stalling the suite; and the check that a run was refused as bad input in one clean line.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/temp_dir.hpp"

namespace loom::testing {

struct Run {
  int status = -1;
  std::string out, err;
};

inline std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// `loom ARGS` from the source root under a 60 s timeout (exit 124 when it runs out); `prefix`
// is shell run first in the same shell (a `ulimit`, a `trap`).
inline Run run_loom(const TempDir& dir, const std::string& args, const std::string& prefix = "") {
  const std::string out = dir.file("stdout.txt"), err = dir.file("stderr.txt");
  const std::string cmd = "cd '" + std::string(LOOM_SOURCE_DIR) + "' && " + prefix +
                          " timeout 60 '" + LOOM_BINARY + "' " + args + " > '" + out + "' 2> '" +
                          err + "'";
  const int raw = std::system(cmd.c_str());
  Run r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = read_all(out);
  r.err = read_all(err);
  return r;
}

// Exit 2 and one line "loom: error: ..." that mentions `needle`, with no control character
// and no byte that is not ASCII or UTF-8 text, of bounded length.
inline void check_bad_input(const Run& r, const std::string& needle) {
  INFO("stderr: " << r.err.substr(0, 3000));
  CHECK(r.status == 2);
  REQUIRE(!r.err.empty());
  CHECK(r.err.rfind("loom: error: ", 0) == 0);
  CHECK(r.err.find('\n') == r.err.size() - 1);
  bool control = false;
  for (size_t i = 0; i + 1 < r.err.size(); ++i) {
    const auto c = static_cast<unsigned char>(r.err[i]);
    control = control || c < 0x20 || c == 0x7f;
  }
  CHECK_FALSE(control);
  CHECK(r.err.size() < 2200);
  CHECK(r.err.find(needle) != std::string::npos);
}

}  // namespace loom::testing
