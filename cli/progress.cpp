#include "cli/progress.hpp"

#include <unistd.h>  // isatty (POSIX)

#include <algorithm>
#include <iostream>

namespace loom::cli {

namespace {
constexpr int WIDTH = 30;
constexpr double REDRAW_S = 0.1;
}  // namespace

ProgressBar ProgressBar::on_stderr(std::string label) {
  return ProgressBar(std::move(label), isatty(STDERR_FILENO) == 1, std::cerr);
}

ProgressBar::ProgressBar(std::string label, bool enabled, std::ostream& out, double delay_s)
    : label_(std::move(label)),
      enabled_(enabled),
      out_(&out),
      delay_s_(delay_s),
      start_(Clock::now()),
      last_draw_(start_) {}

ProgressBar::~ProgressBar() {
  clear();
}

void ProgressBar::update(double fraction) {
  if (!enabled_) return;
  const auto now = Clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  if (elapsed < delay_s_) return;
  if (drawn_ && std::chrono::duration<double>(now - last_draw_).count() < REDRAW_S) return;
  last_draw_ = now;
  fraction = std::clamp(fraction, 0.0, 1.0);
  const int filled = static_cast<int>(fraction * WIDTH);
  *out_ << '\r' << label_ << " [" << std::string(static_cast<size_t>(filled), '#')
        << std::string(static_cast<size_t>(WIDTH - filled), ' ') << "] "
        << static_cast<int>(fraction * 100) << "%" << std::flush;
  drawn_ = true;
}

void ProgressBar::clear() {
  if (!drawn_) return;
  // Blank the whole line, then return to its start.
  *out_ << '\r' << std::string(label_.size() + WIDTH + 9, ' ') << '\r' << std::flush;
  drawn_ = false;
}

}  // namespace loom::cli
