// The step timeline of the HTML report: the representative GPU of each pipeline stage, one
// lane per stream (the compute stream split by what runs on it), from the slices the Chrome
// trace writes.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "cli/html_escape.hpp"
#include "cli/report_parts.hpp"
#include "common/units.hpp"

namespace loom::cli::report {
namespace {

using strategies::TimelineSlice;
using strategies::TraceCategory;

constexpr double LABEL_W = 130;  // lane labels
constexpr double PLOT_W = 1000;  // the step, left to right
constexpr double AXIS_H = 22;    // tick labels above the lanes
constexpr double STAGE_H = 18;   // a stage's heading
constexpr double LANE_H = 14;
constexpr double LANE_GAP = 3;
constexpr double STAGE_GAP = 10;
constexpr double MERGE_PX = 0.5;  // slices closer than this on one lane draw as one rect

// The lane a slice is drawn on: its stream, except that the blocking model-parallel
// collectives on the compute stream get a lane of their own per kind. Lanes of one serial
// stream never overlap.
std::string lane_of(const TimelineSlice& s) {
  const bool blocking_comm = s.category == TraceCategory::TP || s.category == TraceCategory::CP ||
                             s.category == TraceCategory::EP || s.category == TraceCategory::PP;
  if (s.stream == "compute" && blocking_comm) return to_string(s.category);
  return s.stream;
}

// Lanes top to bottom: compute first, then the kinds of communication in the order of the
// report's tables; streams loom does not know yet follow by name.
std::pair<int, std::string> lane_rank(const std::string& lane) {
  static const std::array<std::string, 8> order = {"compute", "tp", "tp-overlap", "cp",
                                                   "ep",      "pp", "dp",         "dp-ag"};
  const auto it = std::find(order.begin(), order.end(), lane);
  return {static_cast<int>(it - order.begin()), lane};
}

// Tick spacing of 1, 2 or 5 times a power of ten giving at most ~8 ticks over `span`.
double tick_step(double span) {
  const double raw = span / 8;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double f : {1.0, 2.0, 5.0})
    if (f * mag >= raw) return f * mag;
  return 10 * mag;
}

std::string span_text(double start, double end) {
  return fmt::format("{} to {} ({})", format_time(start), format_time(end),
                     format_time(end - start));
}

// What a compute slice computes, from its pass letter ("F mb3 c0 ...": forward, "B" backward,
// "W" weight gradients of zero-bubble schedules, "R" recompute), so that the timeline draws the
// passes in colours of their own; "" for other slices (the optimizer, communication).
std::string pass_of(const TimelineSlice& s) {
  if (s.category != TraceCategory::COMPUTE || s.name.size() < 2 || s.name[1] != ' ') return "";
  switch (s.name[0]) {
    case 'F':
      return "forward";
    case 'B':
      return "backward";
    case 'W':
      return "weight-gradients";
    case 'R':
      return "recompute";
    default:
      return "";
  }
}

// The slice's classes: its category (what the legend's buttons hide) and its pass.
std::string slice_class(const TimelineSlice& s) {
  const std::string pass = pass_of(s);
  return fmt::format("slice c-{}{}", to_string(s.category), pass.empty() ? "" : " c-" + pass);
}

// A run of slices of one category merged into one rect.
struct Run {
  const TimelineSlice* first = nullptr;
  const TimelineSlice* last = nullptr;
  double start = 0, end = 0, busy = 0;
  int count = 0;
};

std::string run_rect(const Run& run, double scale, double y) {
  const double x0 = LABEL_W + run.start * scale;
  const double w = std::max(0.8, (run.end - run.start) * scale);  // a short slice stays visible
  std::string title =
      run.count == 1
          ? fmt::format("{}: {}", html_escape(run.first->name), span_text(run.start, run.end))
          : fmt::format("{} slices, {} … {}: {}, busy {}", run.count, html_escape(run.first->name),
                        html_escape(run.last->name), span_text(run.start, run.end),
                        format_time(run.busy));
  return fmt::format(
      "<rect class=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"><title>{}</title>"
      "</rect>\n",
      slice_class(*run.first), num(x0), num(y), num(w), num(LANE_H), title);
}

// The rects of one lane: consecutive slices of one category less than MERGE_PX apart are one.
std::string lane_rects(std::vector<const TimelineSlice*> slices, double scale, double y) {
  std::stable_sort(slices.begin(), slices.end(),
                   [](const auto* a, const auto* b) { return a->start_s < b->start_s; });
  std::string out;
  Run run;
  for (const TimelineSlice* s : slices) {
    const bool joins = run.count > 0 && s->category == run.first->category &&
                       pass_of(*s) == pass_of(*run.first) &&
                       (s->start_s - run.end) * scale < MERGE_PX;
    if (!joins) {
      if (run.count > 0) out += run_rect(run, scale, y);
      run = Run{s, s, s->start_s, s->end_s, 0, 0};
    }
    run.last = s;
    run.end = std::max(run.end, s->end_s);
    run.busy += s->end_s - s->start_s;
    ++run.count;
  }
  if (run.count > 0) out += run_rect(run, scale, y);
  return out;
}

std::string axis(double total, double scale, double height) {
  std::string out;
  const double step = tick_step(total);
  for (int i = 0; i * step <= total * (1 + 1e-9); ++i) {
    const double x = LABEL_W + i * step * scale;
    out += fmt::format(
        "<line class=\"grid\" x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\"/>"
        "<text class=\"tick\" x=\"{0}\" y=\"{3}\">{4}</text>\n",
        num(x), num(AXIS_H - 4), num(height), num(AXIS_H - 8), format_time(i * step));
  }
  return out;
}

// One button per category present (it shows or hides that category); the compute button shows
// a swatch per pass present, in the colours the bars have.
std::string legend(const std::set<TraceCategory>& present, const std::set<std::string>& passes) {
  std::string out = "<div class=\"legend\" id=\"timeline-legend\">\n";
  for (TraceCategory c : TIMELINE_CATEGORIES) {
    if (!present.count(c)) continue;
    const std::string name = to_string(c);
    std::string swatches;
    if (c == TraceCategory::COMPUTE && !passes.empty()) {
      for (const char* pass : {"forward", "backward", "weight-gradients", "recompute"}) {
        if (passes.count(pass))
          swatches += fmt::format("<span class=\"swatch c-{0}\"></span>{0} ", pass);
      }
    } else {
      swatches = fmt::format("<span class=\"swatch c-{0}\"></span>{0}", name);
    }
    out += fmt::format(
        "<button type=\"button\" data-toggle=\"{0}\" title=\"show or hide {0}\">{1}</button>\n",
        name, swatches);
  }
  return out + "</div>\n";
}

}  // namespace

std::string timeline_html(const strategies::StepReport& r) {
  std::map<int, std::map<std::pair<int, std::string>, std::vector<const TimelineSlice*>>> lanes;
  std::set<int> shown(r.stage_ranks.begin(), r.stage_ranks.end());
  std::set<TraceCategory> present;
  std::set<std::string> passes;
  double total = r.step_time_s;
  for (const TimelineSlice& s : r.timeline) {
    if (!shown.count(s.rank)) continue;
    lanes[s.rank][lane_rank(lane_of(s))].push_back(&s);
    present.insert(s.category);
    if (const std::string pass = pass_of(s); !pass.empty()) passes.insert(pass);
    total = std::max(total, s.end_s);
  }
  if (!(total > 0) || !std::isfinite(total)) total = 1;
  const double scale = PLOT_W / total;
  std::string body;
  double y = AXIS_H;
  for (size_t stage = 0; stage < r.stage_ranks.size(); ++stage) {
    const int rank = r.stage_ranks[stage];
    body += fmt::format("<text class=\"stage\" x=\"0\" y=\"{}\">stage {} (rank {})</text>\n",
                        num(y + STAGE_H - 5), stage, rank);
    y += STAGE_H;
    const auto it = lanes.find(rank);
    if (it == lanes.end()) {
      body += fmt::format("<text class=\"lane\" x=\"8\" y=\"{}\">no slices recorded</text>\n",
                          num(y + LANE_H - 3));
      y += LANE_H + LANE_GAP;
    } else {
      for (const auto& [key, slices] : it->second) {
        body += fmt::format("<text class=\"lane\" x=\"8\" y=\"{}\">{}</text>\n",
                            num(y + LANE_H - 3), html_escape(key.second));
        body += lane_rects(slices, scale, y);
        y += LANE_H + LANE_GAP;
      }
    }
    y += STAGE_GAP;
  }
  if (r.pipeline_time_s > 0 && r.pipeline_time_s < total) {
    const double x = LABEL_W + r.pipeline_time_s * scale;
    body += fmt::format(
        "<line class=\"marker\" x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\"><title>end of the "
        "last forward/backward pass: {3}</title></line>\n",
        num(x), num(AXIS_H), num(y), format_time(r.pipeline_time_s));
  }
  const double width = LABEL_W + PLOT_W + 20;
  std::string out = legend(present, passes);
  out += fmt::format(
      "<svg id=\"timeline-svg\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {0} {1}\" "
      "width=\"{0}\" height=\"{1}\" role=\"img\" aria-label=\"step timeline per pipeline "
      "stage\">\n",
      num(width), num(y));
  out += axis(total, scale, y);
  out += body;
  return out + "</svg>\n";
}

}  // namespace loom::cli::report
