#pragma once
// A progress bar on stderr for long runs (`search`, `plan`, `simulate --full` on thousands of
// GPUs). Drawn only when stderr is a terminal and the work has run longer than a delay (1 s),
// redrawn at most ten times a second, and erased ("\r" then ANSI erase-line) before the
// command prints its answer, so redirected or piped output never holds it and golden outputs
// stay byte-identical. One bar per command: each phase of the work (the search's fast
// estimates, then its exact simulations) is named on the bar, with its rate and ETA.
#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <string>

namespace loom::cli {

/// One progress bar, "loom search: fast estimates [#####     ]  42%  1,234/s  ETA 0:12",
/// redrawn in place with '\r'.
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

  /// Names the phase now running ("fast estimates"); a new name restarts the rate and ETA
  /// clock, so a bar that returns to 0% says why.
  void phase(const std::string& name);
  /// Reports `fraction` of the phase done (clamped to [0, 1]); the ETA follows from it.
  void update(double fraction);
  /// Reports `done` of `total` items of the phase (`unit` per second as the rate, e.g.
  /// "layouts").
  void update(std::int64_t done, std::int64_t total, const std::string& unit);
  /// Erases the bar now (a later update may draw it again). Call before printing the answer.
  void clear();

  /// The text of one bar (no '\r'): label, phase, bar, percent, rate (when `unit` is set and
  /// `elapsed_s` > 0) and ETA (when some of the work is done). `done`/`total` < 0: no rate.
  static std::string render(const std::string& label, const std::string& phase, double fraction,
                            double elapsed_s, std::int64_t done, const std::string& unit);

 private:
  using Clock = std::chrono::steady_clock;
  void draw(double fraction, std::int64_t done, const std::string& unit);
  std::string label_;
  std::string phase_;
  bool enabled_;
  std::ostream* out_;
  double delay_s_;
  Clock::time_point start_;
  Clock::time_point phase_start_;
  Clock::time_point last_draw_;
  bool drawn_ = false;
};

}  // namespace loom::cli
