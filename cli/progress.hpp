#pragma once
// A progress bar on stderr for long runs (`simulate --full` on thousands of GPUs). Drawn only
// when stderr is a terminal and the work has run longer than a delay (1 s), redrawn at most
// ten times a second and erased when done, so redirected or piped output never holds it and
// golden outputs stay byte-identical.
#include <chrono>
#include <iosfwd>
#include <string>

namespace loom::cli {

/// One progress bar, "label [#####     ]  42%", redrawn in place with '\r'.
class ProgressBar {
 public:
  /// A bar on std::cerr, enabled when stderr is a terminal (isatty).
  static ProgressBar on_stderr(std::string label);
  /// A bar on `out`, drawn only when `enabled`, once `delay_s` seconds have passed.
  ProgressBar(std::string label, bool enabled, std::ostream& out, double delay_s = 1.0);
  /// Erases the bar if it was drawn.
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  /// Reports `fraction` of the work done (clamped to [0, 1]).
  void update(double fraction);
  /// Erases the bar now (a later update may draw it again).
  void clear();

 private:
  using Clock = std::chrono::steady_clock;
  std::string label_;
  bool enabled_;
  std::ostream* out_;
  double delay_s_;
  Clock::time_point start_;
  Clock::time_point last_draw_;
  bool drawn_ = false;
};

}  // namespace loom::cli
