// The progress bar: drawn on a terminal after its delay, erased when done, and never drawn
// when the output is not a terminal (so redirected and golden outputs never hold it).
#include <doctest/doctest.h>

#include <sstream>

#include "cli/progress.hpp"

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
    CHECK(drawn.rfind("\rsimulating [", 0) == 0);
    CHECK(drawn.find("] 50%") != std::string::npos);
    CHECK(drawn.find('\n') == std::string::npos);  // redrawn in place, never a new line
  }
  const std::string all = out.str();
  CHECK(all.back() == '\r');  // the destructor blanked the line and returned to its start
}
