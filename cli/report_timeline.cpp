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

// The runs of one lane: consecutive slices of one category less than MERGE_PX apart are one.
std::vector<Run> lane_runs(std::vector<const TimelineSlice*> slices, double scale) {
  std::stable_sort(slices.begin(), slices.end(),
                   [](const auto* a, const auto* b) { return a->start_s < b->start_s; });
  std::vector<Run> out;
  Run run;
  for (const TimelineSlice* s : slices) {
    const bool joins = run.count > 0 && s->category == run.first->category &&
                       pass_of(*s) == pass_of(*run.first) &&
                       (s->start_s - run.end) * scale < MERGE_PX;
    if (!joins) {
      if (run.count > 0) out.push_back(run);
      run = Run{s, s, s->start_s, s->end_s, 0, 0};
    }
    run.last = s;
    run.end = std::max(run.end, s->end_s);
    run.busy += s->end_s - s->start_s;
    ++run.count;
  }
  if (run.count > 0) out.push_back(run);
  return out;
}

std::string lane_rects(const std::vector<Run>& runs, double scale, double y) {
  std::string out;
  for (const Run& run : runs) out += run_rect(run, scale, y);
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

// The passes a compute slice is drawn as, in the legend's order.
constexpr std::array<const char*, 4> PASS_CLASSES = {"forward", "backward", "weight-gradients",
                                                     "recompute"};

// One button per category present (it shows or hides that category); the compute button shows
// a swatch per pass present, in the colours the bars have.
std::string legend(const std::set<TraceCategory>& present, const std::set<std::string>& passes) {
  std::string out = "<div class=\"legend\" id=\"timeline-legend\">\n";
  for (TraceCategory c : TIMELINE_CATEGORIES) {
    if (!present.count(c)) continue;
    const std::string name = to_string(c);
    std::string swatches;
    if (c == TraceCategory::COMPUTE && !passes.empty()) {
      for (const char* pass : PASS_CLASSES) {
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

// Slices of the shown GPUs by rank, then by lane (lane_rank order).
using Lanes =
    std::map<int, std::map<std::pair<int, std::string>, std::vector<const TimelineSlice*>>>;

// A lane drawing more rects than this (1,000 px wide: two pixels a rect) is unreadable one
// by one: the timeline is then drawn by phase (phase_timeline_html).
constexpr size_t MAX_LANE_RECTS = 500;

// The dashed line at the end of the last forward/backward pass.
std::string pipeline_marker(const strategies::StepReport& r, double scale, double y, double total) {
  if (!(r.pipeline_time_s > 0 && r.pipeline_time_s < total)) return "";
  const double x = LABEL_W + r.pipeline_time_s * scale;
  return fmt::format(
      "<line class=\"marker\" x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\"><title>end of the "
      "last forward/backward pass: {3}</title></line>\n",
      num(x), num(AXIS_H), num(y), format_time(r.pipeline_time_s));
}

// `before` (the legend, a note), then the timeline SVG of height `y` around `body`.
std::string svg_document(std::string before, const std::string& body, double total, double scale,
                         double y) {
  const double width = LABEL_W + PLOT_W + 20;
  std::string out = std::move(before);
  out += fmt::format(
      "<svg id=\"timeline-svg\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {0} {1}\" "
      "width=\"{0}\" height=\"{1}\" role=\"img\" aria-label=\"step timeline per pipeline "
      "stage\">\n",
      num(width), num(y));
  out += axis(total, scale, y);
  out += body;
  return out + "</svg>\n";
}

// The phases of a stage's step, from its compute stream's passes: warm-up (forwards only,
// up to its first backward), steady (forwards and backwards alternate, to the end of its last
// forward), cool-down (backwards only, to the end of its last pass), after (data-parallel work
// and the optimizer, to the end of the step).
struct Phase {
  const char* name;
  double start = 0, end = 0;
};
std::array<Phase, 4> phases_of(const std::vector<const TimelineSlice*>& compute, double total) {
  double first_backward = -1, last_forward = 0, last_pass = 0;
  for (const TimelineSlice* s : compute) {
    const std::string pass = pass_of(*s);
    if (pass.empty()) continue;
    last_pass = std::max(last_pass, s->end_s);
    if (pass == "forward") last_forward = std::max(last_forward, s->end_s);
    if ((pass == "backward" || pass == "weight-gradients") &&
        (first_backward < 0 || s->start_s < first_backward))
      first_backward = s->start_s;
  }
  const double t1 = first_backward < 0 ? last_pass : first_backward;
  const double t2 = std::max(t1, last_forward);
  const double t3 = std::max(t2, last_pass);
  return {{{"warm-up", 0, t1},
           {"steady", t1, t2},
           {"cool-down", t2, t3},
           {"after", t3, std::max(t3, total)}}};
}

// Seconds of `slices` (one serial stream's, or one lane's: they do not overlap) inside
// [a, b), by their class.
std::map<std::string, double> busy_by_class(const std::vector<const TimelineSlice*>& slices,
                                            double a, double b) {
  std::map<std::string, double> out;
  for (const TimelineSlice* s : slices) {
    const double t = std::min(b, s->end_s) - std::max(a, s->start_s);
    if (t > 0) out[slice_class(*s)] += t;
  }
  return out;
}

// The order a phase bar stacks its classes in: the legend's (passes, then categories).
int class_order(const std::string& c) {
  const std::string last = c.substr(c.rfind(' ') + 1);
  int i = 0;
  for (const char* pass : PASS_CLASSES) {
    if (last == fmt::format("c-{}", pass)) return i;
    ++i;
  }
  for (TraceCategory category : TIMELINE_CATEGORIES) {
    if (last == "c-" + to_string(category)) return i;
    ++i;
  }
  return i;
}

std::string percent(double fraction) {
  return fmt::format("{:.1f}%", 100 * fraction);
}

// One lane's bars over the phases: a grey box per phase, filled from its left by the lane's
// busy share of it in the colours of what kept it busy.
std::string phase_bars(const std::vector<const TimelineSlice*>& slices,
                       const std::array<Phase, 4>& phases, const std::string& lane, double scale,
                       double y) {
  std::string out;
  for (const Phase& ph : phases) {
    const double span = ph.end - ph.start;
    if (!(span > 0)) continue;
    const auto busy = busy_by_class(slices, ph.start, ph.end);
    double all = 0;
    for (const auto& [c, t] : busy) all += t;
    const double x0 = LABEL_W + ph.start * scale;
    const double w = std::max(0.8, span * scale);
    out += fmt::format(
        "<rect class=\"phase\" fill=\"#ececec\" stroke=\"#fff\" x=\"{}\" y=\"{}\" width=\"{}\" "
        "height=\"{}\">"
        "<title>{} {}: {}; busy {}, idle {}</title></rect>\n",
        num(x0), num(y), num(w), num(LANE_H), html_escape(lane), ph.name,
        span_text(ph.start, ph.end), percent(std::min(1.0, all / span)),
        percent(std::max(0.0, 1 - all / span)));
    std::vector<std::pair<std::string, double>> parts(busy.begin(), busy.end());
    std::stable_sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) {
      return class_order(a.first) < class_order(b.first);
    });
    double x = x0;
    for (const auto& [c, t] : parts) {
      const double part_w = std::min(w - (x - x0), w * t / span);
      if (!(part_w > 0)) continue;
      const std::string what = c.substr(c.rfind("c-") + 2);
      out += fmt::format(
          "<rect class=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"><title>{} {}: {} "
          "{} ({} of {})</title></rect>\n",
          c, num(x), num(y), num(part_w), num(LANE_H), html_escape(lane), ph.name, what,
          format_time(t), percent(t / span), format_time(span));
      x += part_w;
    }
  }
  return out;
}

// The timeline when a lane has more slices than the plot can draw one by one (`most` rects):
// each stage's lanes by phase (phases_of), a bar per phase filled by the lane's busy share,
// the phases named above each stage, each stage's idle time before its last pass in its
// heading, and the same numbers in a table (id phase-table).
std::string phase_timeline_html(const strategies::StepReport& r, const Lanes& lanes,
                                const std::set<TraceCategory>& present,
                                const std::set<std::string>& passes, double total, size_t most) {
  const double scale = PLOT_W / total;
  std::string body, rows;
  double y = AXIS_H;
  for (size_t stage = 0; stage < r.stage_ranks.size(); ++stage) {
    const int rank = r.stage_ranks[stage];
    const auto it = lanes.find(rank);
    std::vector<const TimelineSlice*> stream;  // the compute stream: passes, blocking comm
    if (it != lanes.end())
      for (const auto& [key, slices] : it->second)
        for (const TimelineSlice* s : slices)
          if (s->stream == "compute") stream.push_back(s);
    const auto phases = phases_of(stream, total);
    const double pipeline = phases[2].end;
    double busy = 0;
    for (const auto& [c, t] : busy_by_class(stream, 0, pipeline)) busy += t;
    const double idle = std::max(0.0, pipeline - busy);
    const double idle_share = pipeline > 0 ? idle / pipeline : 0;
    body += fmt::format(
        "<text class=\"stage\" x=\"0\" y=\"{}\">stage {} (rank {}): compute stream idle {} "
        "of {} before its last pass ends ({})</text>\n",
        num(y + STAGE_H - 5), stage, rank, format_time(idle), format_time(pipeline),
        percent(idle_share));
    y += STAGE_H;
    for (const Phase& ph : phases) {
      if ((ph.end - ph.start) * scale < 48) continue;  // too narrow for its name
      body += fmt::format("<text class=\"lane\" x=\"{}\" y=\"{}\">{}</text>\n",
                          num(LABEL_W + ph.start * scale + 2), num(y + LANE_H - 3), ph.name);
    }
    y += LANE_H + LANE_GAP;
    if (it == lanes.end()) {
      body += fmt::format("<text class=\"lane\" x=\"8\" y=\"{}\">no slices recorded</text>\n",
                          num(y + LANE_H - 3));
      y += LANE_H + LANE_GAP;
    } else {
      for (const auto& [key, slices] : it->second) {
        body += fmt::format("<text class=\"lane\" x=\"8\" y=\"{}\">{}</text>\n",
                            num(y + LANE_H - 3), html_escape(key.second));
        body += phase_bars(slices, phases, key.second, scale, y);
        y += LANE_H + LANE_GAP;
      }
    }
    y += STAGE_GAP;
    rows += fmt::format("<tr><td>stage {}</td>", stage);
    for (const Phase& ph : phases)
      rows += fmt::format("<td>{}</td>", format_time(ph.end - ph.start));
    rows += fmt::format("<td>{}</td><td>{}</td></tr>\n", format_time(idle), percent(idle_share));
  }
  body += pipeline_marker(r, scale, y, total);
  std::string before = legend(present, passes);
  before += fmt::format(
      "<p class=\"note\" id=\"phase-note\">Too many slices to draw one by one ({} on one lane): "
      "each stage is drawn by phase. <b>warm-up</b>: forwards only, up to the stage's first "
      "backward; <b>steady</b>: forwards and backwards alternate, to its last forward; "
      "<b>cool-down</b>: backwards only, to its last pass; <b>after</b>: data-parallel work "
      "and the optimizer. Each lane's bar is filled from its left by the share of the phase "
      "it was busy, in the colours of what kept it busy; the grey rest is idle. Pipeline "
      "bubble: {} ({} of the {} pipeline phase). The Chrome trace (<code>--trace</code>) has "
      "every slice.</p>\n",
      most, format_time(r.bubble_time_s), percent(r.bubble_fraction),
      format_time(r.pipeline_time_s));
  std::string out = svg_document(std::move(before), body, total, scale, y);
  out +=
      "<table id=\"phase-table\">\n<thead><tr><th>stage</th><th>warm-up</th><th>steady</th>"
      "<th>cool-down</th><th>after</th><th>compute stream idle before its last pass</th>"
      "<th>share</th></tr></thead>\n";
  return out + rows + "</table>\n";
}

}  // namespace

std::string timeline_html(const strategies::StepReport& r) {
  Lanes lanes;
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
  // Each lane's rects; a lane with more than the plot can show one by one (many micro-batches
  // and virtual stages) turns the whole timeline into its phase view.
  std::map<int, std::map<std::pair<int, std::string>, std::vector<Run>>> runs;
  size_t most = 0;
  for (const auto& [rank, by_lane] : lanes) {
    for (const auto& [key, slices] : by_lane) {
      auto& lane = runs[rank][key] = lane_runs(slices, scale);
      most = std::max(most, lane.size());
    }
  }
  if (most > MAX_LANE_RECTS) return phase_timeline_html(r, lanes, present, passes, total, most);
  std::string body;
  double y = AXIS_H;
  for (size_t stage = 0; stage < r.stage_ranks.size(); ++stage) {
    const int rank = r.stage_ranks[stage];
    body += fmt::format("<text class=\"stage\" x=\"0\" y=\"{}\">stage {} (rank {})</text>\n",
                        num(y + STAGE_H - 5), stage, rank);
    y += STAGE_H;
    const auto it = runs.find(rank);
    if (it == runs.end()) {
      body += fmt::format("<text class=\"lane\" x=\"8\" y=\"{}\">no slices recorded</text>\n",
                          num(y + LANE_H - 3));
      y += LANE_H + LANE_GAP;
    } else {
      for (const auto& [key, lane] : it->second) {
        body += fmt::format("<text class=\"lane\" x=\"8\" y=\"{}\">{}</text>\n",
                            num(y + LANE_H - 3), html_escape(key.second));
        body += lane_rects(lane, scale, y);
        y += LANE_H + LANE_GAP;
      }
    }
    y += STAGE_GAP;
  }
  body += pipeline_marker(r, scale, y, total);
  return svg_document(legend(present, passes), body, total, scale, y);
}

}  // namespace loom::cli::report
