#pragma once
// Runs the loom binary (LOOM_BINARY) for the harness tests that check loom reads what the
// harness writes; returns stdout and the exit status.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <cstdio>
#include <string>

namespace loom::testing {

struct LoomRun {
  std::string out;
  int status = 0;
};

/// `loom ARGS`; stderr is folded into `out` unless `with_stderr` is false (then it goes to the
/// test's own stderr).
inline LoomRun run_loom(const std::string& args, bool with_stderr = true) {
  const std::string cmd = std::string(LOOM_BINARY) + " " + args + (with_stderr ? " 2>&1" : "");
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  LoomRun run;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) run.out.append(buffer, n);
  const int raw = pclose(pipe);
  run.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return run;
}

}  // namespace loom::testing
