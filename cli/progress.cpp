#include "cli/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>  // isatty (POSIX)

#include <algorithm>
#include <cmath>
#include <iostream>

#include "common/units.hpp"

namespace loom::cli {

namespace {
constexpr int WIDTH = 24;
constexpr double REDRAW_S = 0.1;
// Before this share of a phase is done (or this long into it) an ETA is a guess: not shown.
constexpr double ETA_MIN_FRACTION = 0.01;
constexpr double ETA_MIN_S = 0.5;
// "\r" to the line's start, then ANSI EL (erase in line, CSI K): blanks what the bar drew
// whatever its length.
constexpr const char* ERASE_LINE = "\r\x1b[K";

std::string clock_text(double seconds) {
  const auto s = static_cast<std::int64_t>(std::llround(seconds));
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}
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
      phase_start_(start_),
      last_draw_(start_) {}

ProgressBar::~ProgressBar() {
  clear();
}

void ProgressBar::phase(const std::string& name) {
  if (name == phase_) return;
  phase_ = name;
  phase_start_ = Clock::now();
  last_draw_ = Clock::time_point{};  // the new phase's name is drawn at once
}

std::string ProgressBar::render(const std::string& label, const std::string& phase, double fraction,
                                double elapsed_s, std::int64_t done, const std::string& unit) {
  fraction = std::clamp(fraction, 0.0, 1.0);
  const int filled = static_cast<int>(fraction * WIDTH);
  std::string text = label + (phase.empty() ? "" : ": " + phase);
  text += fmt::format(" [{}{}] {:3d}%", std::string(static_cast<size_t>(filled), '#'),
                      std::string(static_cast<size_t>(WIDTH - filled), ' '),
                      static_cast<int>(fraction * 100));
  if (done >= 0 && !unit.empty() && elapsed_s > 0) {
    text += fmt::format("  {} {}/s",
                        format_grouped(std::llround(static_cast<double>(done) / elapsed_s)), unit);
  }
  if (fraction >= 1.0) {
    text += "  done";
  } else if (fraction >= ETA_MIN_FRACTION && elapsed_s >= ETA_MIN_S) {
    text += "  ETA " + clock_text(elapsed_s * (1.0 - fraction) / fraction);
  }
  return text;
}

void ProgressBar::update(double fraction) {
  draw(fraction, -1, "");
}

void ProgressBar::update(std::int64_t done, std::int64_t total, const std::string& unit) {
  const double fraction = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
  draw(fraction, done, unit);
}

void ProgressBar::draw(double fraction, std::int64_t done, const std::string& unit) {
  if (!enabled_) return;
  const auto now = Clock::now();
  if (std::chrono::duration<double>(now - start_).count() < delay_s_) return;
  if (drawn_ && std::chrono::duration<double>(now - last_draw_).count() < REDRAW_S) return;
  last_draw_ = now;
  const double elapsed = std::chrono::duration<double>(now - phase_start_).count();
  *out_ << ERASE_LINE << render(label_, phase_, fraction, elapsed, done, unit) << std::flush;
  drawn_ = true;
}

void ProgressBar::clear() {
  if (!drawn_) return;
  *out_ << ERASE_LINE << std::flush;
  drawn_ = false;
}

}  // namespace loom::cli
