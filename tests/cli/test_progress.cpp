// The progress bar: drawn on a terminal after its delay, erased when done, and never drawn
// when the output is not a terminal (so redirected and golden outputs never hold it).
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "cli/progress.hpp"
#include "tests/cli/cli_run.hpp"

using loom::cli::ProgressBar;

TEST_CASE("cli::ProgressBar: not a terminal, nothing is written") {
  std::ostringstream out;
  {
    ProgressBar bar("simulating", false, out, 0.0);
    bar.update(0.5);
    bar.update(1.0);
  }
  CHECK(out.str().empty());
}

TEST_CASE("cli::ProgressBar: before its delay, nothing is written") {
  std::ostringstream out;
  {
    ProgressBar bar("simulating", true, out, 3600.0);
    bar.update(0.5);
  }
  CHECK(out.str().empty());
}

TEST_CASE("cli::ProgressBar: on a terminal after the delay it is drawn in place, then erased") {
  std::ostringstream out;
  {
    ProgressBar bar("simulating", true, out, 0.0);
    bar.update(0.5);
    const std::string drawn = out.str();
    CHECK(drawn.rfind("\r\x1b[Ksimulating [", 0) == 0);
    CHECK(drawn.find("]  50%") != std::string::npos);
    CHECK(drawn.find('\n') == std::string::npos);  // redrawn in place, never a new line
  }
  const std::string all = out.str();
  // The destructor returned to the line's start and erased it (ANSI erase-line).
  CHECK(all.substr(all.size() - 4) == "\r\x1b[K");
}

TEST_CASE("cli::ProgressBar: the phase is named, and a new phase restarts the bar") {
  std::ostringstream out;
  ProgressBar bar("loom search", true, out, 0.0);
  bar.phase("fast estimates (1/2)");
  bar.update(std::int64_t{50}, std::int64_t{100}, "layouts");
  CHECK(out.str().find("loom search: fast estimates (1/2) [") != std::string::npos);
  CHECK(out.str().find("]  50%") != std::string::npos);
  bar.phase("exact simulations (2/2)");
  bar.update(std::int64_t{0}, std::int64_t{8}, "plans");
  CHECK(out.str().find("loom search: exact simulations (2/2) [") != std::string::npos);
  bar.clear();
  // Every draw and the clear start with '\r' and ANSI erase-line, so no longer text is left.
  CHECK(out.str().rfind("\r\x1b[K", 0) == 0);
  CHECK(out.str().size() >= 4);
  CHECK(out.str().substr(out.str().size() - 4) == "\r\x1b[K");
}

TEST_CASE("cli::ProgressBar: rate and ETA") {
  // 25 of 100 in 10 s: 3 items/s, 30 s to go.
  const std::string text = ProgressBar::render("loom plan", "searching", 0.25, 10.0, 25, "counts");
  CHECK(text == "loom plan: searching [######                  ]  25%  3 counts/s  ETA 0:30");
  // Grouped thousands in the rate; hours in the ETA.
  const std::string big = ProgressBar::render("x", "", 0.5, 4000.0, 8000000, "layouts");
  CHECK(big.find("2,000 layouts/s") != std::string::npos);
  CHECK(big.find("ETA 1:06:40") != std::string::npos);
  // No ETA before 1% or half a second; "done" at 100%.
  CHECK(ProgressBar::render("x", "", 0.001, 10.0, -1, "").find("ETA") == std::string::npos);
  CHECK(ProgressBar::render("x", "", 0.5, 0.1, -1, "").find("ETA") == std::string::npos);
  CHECK(ProgressBar::render("x", "", 1.0, 3.0, -1, "").find("done") != std::string::npos);
}

// Whether this build runs under AddressSanitizer (scripts/sanitize): loom is slower there.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool SANITIZED = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool SANITIZED = true;
#else
constexpr bool SANITIZED = false;
#endif
#else
constexpr bool SANITIZED = false;
#endif

// The real thing under a pseudo-terminal (util-linux `script`): stdout and stderr both on the
// terminal, the bar drawn while the search runs, erased before the answer; redirected, never.
TEST_CASE("cli::ProgressBar: loom search under a pseudo-terminal") {
  if (std::system("command -v script > /dev/null 2>&1") != 0) {
    MESSAGE("util-linux `script` not found: pseudo-terminal test skipped");
    return;
  }
  const loom::testing::TempDir dir("progress_pty");
  const std::string transcript = dir.file("pty.txt"), redirected = dir.file("err.txt");
  // A search that runs well past the bar's 1 s delay: 2.6 s in a release build. The sanitized
  // loom is ~11x slower (30 s for it), so there a smaller one (2.7 s; 0.6 s released).
  const std::string search = std::string("'") + LOOM_BINARY + "' search " +
                             (SANITIZED ? "--model llama3-8b --cluster dgx-h100 --nodes 2 "
                                          "--threads 1 --top 3 --gbs 256"
                                        : "--model llama3-70b --cluster dgx-h100 --nodes 16 "
                                          "--threads 1 --top 3 --gbs 1024");
  const std::string cmd = "cd '" + std::string(LOOM_SOURCE_DIR) +
                          "' && timeout 120 script -qec \"" + search + "\" /dev/null > '" +
                          transcript + "'";
  REQUIRE(std::system(cmd.c_str()) == 0);
  const std::string pty = loom::testing::read_all(transcript);
  INFO("transcript head: " << pty.substr(0, 600));
  const auto answer = pty.find(SANITIZED ? "model llama3-8b" : "model llama3-70b");
  REQUIRE(answer != std::string::npos);
  const std::string before = pty.substr(0, answer);
  // The bar was drawn (the search runs for seconds), its phase named, and erased at once
  // before the answer: the answer starts a clean line.
  // (which phase shows depends on the machine's speed: the bar waits a second to appear)
  CHECK((before.find("loom search: fast estimates (1/2) [") != std::string::npos ||
         before.find("loom search: exact simulations (2/2) [") != std::string::npos));
  CHECK(before.find("%") != std::string::npos);
  CHECK(before.size() >= 4);
  CHECK(before.substr(before.size() - 4) == "\r\x1b[K");
  CHECK(pty.find("\x1b[K", answer) == std::string::npos);  // nothing drawn after the answer
  // stderr redirected to a file: no bar, not even under a terminal for stdout.
  const std::string quiet = "cd '" + std::string(LOOM_SOURCE_DIR) +
                            "' && timeout 120 script -qec \"" + search + " 2> '" + redirected +
                            "'\" /dev/null > /dev/null";
  REQUIRE(std::system(quiet.c_str()) == 0);
  CHECK(loom::testing::read_all(redirected).empty());
}
