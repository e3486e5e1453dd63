// The bar charts of the HTML report: memory per pipeline stage against the GPU's capacity,
// and communication per parallel dimension, exposed and overlapped, against the step time.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "cli/report_parts.hpp"
#include "common/units.hpp"

namespace loom::cli::report {
namespace {

constexpr double LABEL_W = 90;  // row labels
constexpr double PLOT_W = 800;  // the scale, left to right
constexpr double TEXT_W = 260;  // the value after each bar
constexpr double TOP = 22;      // room for the capacity / step-time label
constexpr double BAR_H = 18;
constexpr double BAR_GAP = 8;

struct Part {
  const char* name;
  double models::StageMemory::*bytes;
};
constexpr std::array<Part, 5> MEMORY_PARTS = {
    {{"weights", &models::StageMemory::weights_bytes},
     {"gradients", &models::StageMemory::gradients_bytes},
     {"optimizer", &models::StageMemory::optimizer_bytes},
     {"activations", &models::StageMemory::activations_bytes},
     {"other", &models::StageMemory::other_bytes}}};

std::string svg_open(const char* id, const char* label, double height) {
  return fmt::format(
      "<svg id=\"{0}\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {1} {2}\" "
      "width=\"{1}\" height=\"{2}\" role=\"img\" aria-label=\"{3}\">\n",
      id, num(LABEL_W + PLOT_W + TEXT_W), num(height), label);
}

// A labelled vertical line across the chart at `x` (capacity, step time).
std::string limit_line(double x, double height, const std::string& label) {
  return fmt::format(
      "<line class=\"limit\" x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\"/>"
      "<text class=\"limit-label\" x=\"{0}\" y=\"{3}\">{4}</text>\n",
      num(x), num(TOP - 2), num(height), num(TOP - 7), label);
}

std::string pct(double part, double whole) {
  return whole > 0 ? format_percent(part / whole) : "n/a";
}

std::string memory_table(const models::MemoryReport& m, double capacity) {
  std::string out =
      "<table id=\"memory-table\">\n<thead><tr><th>stage</th><th>weights</th><th>gradients</"
      "th><th>optimizer</th><th>activations</th><th>other</th><th>total</th><th>of "
      "capacity</th><th>fits</th></tr></thead>\n<tbody>\n";
  for (const auto& s : m.stages) {
    out += fmt::format("<tr><td>{}</td>", s.stage);
    for (const Part& p : MEMORY_PARTS) out += fmt::format("<td>{}</td>", format_bytes(s.*p.bytes));
    const bool fits = s.total_bytes <= capacity;
    out += fmt::format("<td>{}</td><td>{}</td><td class=\"{}\">{}</td></tr>\n",
                       format_bytes(s.total_bytes), pct(s.total_bytes, capacity),
                       fits ? "ok" : "bad", fits ? "yes" : "NO");
  }
  return out + "</tbody>\n</table>\n";
}

}  // namespace

std::string num(double value) {
  if (!std::isfinite(value)) return "0";
  const std::string s = fmt::format("{:.1f}", value);
  return s == "-0.0" ? "0.0" : s;
}

std::string memory_html(const models::MemoryReport& m, double capacity) {
  double scale_bytes = capacity;
  for (const auto& s : m.stages) scale_bytes = std::max(scale_bytes, s.total_bytes);
  scale_bytes = scale_bytes > 0 ? scale_bytes * 1.05 : 1;
  const double scale = PLOT_W / scale_bytes;
  std::string body;
  double y = TOP;
  for (const auto& s : m.stages) {
    const bool fits = s.total_bytes <= capacity;
    body += fmt::format("<g class=\"mem-bar{}\">\n", fits ? "" : " over");
    body += fmt::format("<text class=\"row\" x=\"0\" y=\"{}\">stage {}</text>\n",
                        num(y + BAR_H - 5), s.stage);
    double x = LABEL_W;
    for (const Part& p : MEMORY_PARTS) {
      const double w = std::max(0.0, s.*p.bytes * scale);
      body += fmt::format(
          "<rect class=\"m-{0}\" x=\"{1}\" y=\"{2}\" width=\"{3}\" height=\"{4}\"><title>stage "
          "{5} {0}: {6}</title></rect>\n",
          p.name, num(x), num(y), num(w), num(BAR_H), s.stage, format_bytes(s.*p.bytes));
      x += w;
    }
    body += fmt::format("<text class=\"value\" x=\"{}\" y=\"{}\">{} ({} of capacity){}</text>\n",
                        num(x + 6), num(y + BAR_H - 5), format_bytes(s.total_bytes),
                        pct(s.total_bytes, capacity), fits ? "" : ": does NOT fit");
    body += "</g>\n";
    y += BAR_H + BAR_GAP;
  }
  std::string out = "<div class=\"legend\">";
  for (const Part& p : MEMORY_PARTS)
    out += fmt::format("<span><span class=\"swatch m-{0}\"></span>{0}</span>", p.name);
  out += "</div>\n";
  out += svg_open("memory-svg", "memory per pipeline stage against GPU capacity", y);
  out += body;
  out += limit_line(LABEL_W + capacity * scale, y,
                    fmt::format("GPU capacity {}", format_bytes(capacity)));
  out += "</svg>\n";
  return out + memory_table(m, capacity);
}

std::string comm_html(const strategies::StepReport& r) {
  double scale_s = r.step_time_s;
  for (models::Dim d : models::REPORTED_COMM_DIMS)
    scale_s = std::max(scale_s, r.comm_time_s[models::index(d)]);
  scale_s = scale_s > 0 && std::isfinite(scale_s) ? scale_s * 1.05 : 1;
  const double scale = PLOT_W / scale_s;
  std::string body, table =
                        "<table id=\"comm-table\">\n<thead><tr><th>kind</th><th>communication</"
                        "th><th>exposed</th><th>overlapped</th><th>exposed share of "
                        "step</th></tr></thead>\n<tbody>\n";
  double y = TOP;
  for (models::Dim d : models::REPORTED_COMM_DIMS) {
    const std::string kind = models::to_string(d);
    const double total = r.comm_time_s[models::index(d)];
    const double exposed = std::min(total, r.exposed_comm_s[models::index(d)]);
    // Exposed and total come from separate sums; a difference below 1 ns is rounding.
    const double hidden = total - exposed > 1e-9 ? total - exposed : 0.0;
    body +=
        fmt::format("<text class=\"row\" x=\"0\" y=\"{}\">{}</text>\n", num(y + BAR_H - 5), kind);
    body += fmt::format(
        "<rect class=\"c-{0}\" x=\"{1}\" y=\"{2}\" width=\"{3}\" height=\"{4}\"><title>{0} "
        "exposed: {5}</title></rect>\n"
        "<rect class=\"c-{0} overlapped\" x=\"{6}\" y=\"{2}\" width=\"{7}\" height=\"{4}\">"
        "<title>{0} overlapped: {8}</title></rect>\n",
        kind, num(LABEL_W), num(y), num(exposed * scale), num(BAR_H), format_time(exposed),
        num(LABEL_W + exposed * scale), num(hidden * scale), format_time(hidden));
    body += fmt::format("<text class=\"value\" x=\"{}\" y=\"{}\">{} ({} exposed)</text>\n",
                        num(LABEL_W + total * scale + 6), num(y + BAR_H - 5), format_time(total),
                        format_time(exposed));
    table += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n", kind,
                         format_time(total), format_time(exposed), format_time(hidden),
                         pct(exposed, r.step_time_s));
    y += BAR_H + BAR_GAP;
  }
  std::string out =
      "<div class=\"legend\"><span><span class=\"swatch c-neutral\"></span>exposed (solid, in "
      "the kind's timeline colour)</span><span><span class=\"swatch c-neutral "
      "overlapped\"></span>overlapped with compute (light)</span></div>\n";
  out += svg_open("comm-svg", "communication per parallel dimension, exposed and overlapped", y);
  out += body;
  out += limit_line(LABEL_W + r.step_time_s * scale, y,
                    fmt::format("step time {}", format_time(r.step_time_s)));
  out += "</svg>\n";
  return out + table + "</tbody>\n</table>\n";
}

}  // namespace loom::cli::report
