#include "cli/plan_chart.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "cli/html_escape.hpp"
#include "common/units.hpp"

namespace loom::cli {
namespace {

constexpr double WIDTH = 760, HEIGHT = 460;
constexpr double LEFT = 80, RIGHT = WIDTH - 90, TOP = 50, BOTTOM = HEIGHT - 100;
const char* const COLORS[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                              "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};

// A dollar amount on an axis: "$0", "$250k", "$1.5M".
std::string money(double usd) {
  if (usd == 0) return "$0";
  if (usd >= 1e9) return fmt::format("${:g}B", usd / 1e9);
  if (usd >= 1e6) return fmt::format("${:g}M", usd / 1e6);
  if (usd >= 1e3) return fmt::format("${:g}k", usd / 1e3);
  return fmt::format("${:g}", usd);
}

// The smallest 1, 2 or 5 x 10^k at or above x (x > 0).
double nice_ceiling(double x) {
  const double decade = std::pow(10.0, std::floor(std::log10(x)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * decade >= x * (1 - 1e-12)) return m * decade;
  return 10 * decade;
}

struct Axes {
  double x_lo = 0, x_hi = 0;  // log2 of GPUs
  double d_lo = 0, d_hi = 0;  // log10 of days
  double c_hi = 0;            // dollars; 0: no cost axis
  double x(double gpus) const {
    return LEFT + (std::log2(gpus) - x_lo) / (x_hi - x_lo) * (RIGHT - LEFT);
  }
  double days(double d) const {
    return BOTTOM - (std::log10(d) - d_lo) / (d_hi - d_lo) * (BOTTOM - TOP);
  }
  double cost(double usd) const { return BOTTOM - usd / c_hi * (BOTTOM - TOP); }
};

// A value on the days axis: "0.5", "20", "1,000".
std::string days_label(double d) {
  return d >= 1000 ? format_grouped(std::llrint(d)) : fmt::format("{:g}", d);
}

// The axes of the series drawn (those with days points), the GPU counts where nothing fits and
// the --days limit.
Axes axes_of(const std::vector<ChartSeries>& series, std::optional<double> days_limit) {
  double g_min = INFINITY, g_max = 0, d_min = INFINITY, d_max = 0, c_max = 0;
  if (days_limit && *days_limit > 0 && std::isfinite(*days_limit)) d_min = d_max = *days_limit;
  for (const ChartSeries& s : series) {
    for (double g : s.infeasible) {
      g_min = std::min(g_min, g);
      g_max = std::max(g_max, g);
    }
    if (s.days.empty()) continue;
    for (const ChartPoint& p : s.days) {
      g_min = std::min(g_min, p.gpus);
      g_max = std::max(g_max, p.gpus);
      d_min = std::min(d_min, p.value);
      d_max = std::max(d_max, p.value);
    }
    for (const ChartPoint& p : s.cost) c_max = std::max(c_max, p.value);
  }
  Axes a;
  a.x_lo = std::floor(std::log2(g_min));
  a.x_hi = std::ceil(std::log2(g_max));
  if (a.x_hi <= a.x_lo) a.x_hi = a.x_lo + 1;
  a.d_lo = std::floor(std::log10(d_min));
  a.d_hi = std::ceil(std::log10(d_max));
  if (a.d_hi <= a.d_lo) a.d_hi = a.d_lo + 1;
  a.c_hi = c_max > 0 ? nice_ceiling(c_max * 1.05) : 0;
  return a;
}

std::string line(double x1, double y1, double x2, double y2, const char* style) {
  return fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" {}/>\n", x1, y1,
                     x2, y2, style);
}

std::string text(double x, double y, const char* anchor, const std::string& content,
                 const char* extra = "") {
  return fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"{}\"{}>{}</text>\n", x, y,
                     anchor, extra, html_escape(content));
}

std::string grid_and_axes(const Axes& a) {
  std::string out;
  const double x_step = (a.x_hi - a.x_lo) > 12 ? 2 : 1;
  for (double e = a.x_lo; e <= a.x_hi + 1e-9; e += x_step) {
    const double x = a.x(std::exp2(e));
    out += line(x, TOP, x, BOTTOM, "stroke=\"#e0e0e0\"");
    out += text(x, BOTTOM + 18, "middle", format_grouped(std::llrint(std::exp2(e))));
  }
  const bool fine = a.d_hi - a.d_lo <= 2;
  for (double e = a.d_lo; e <= a.d_hi + 1e-9; e += 1) {
    for (double m : {1.0, 2.0, 5.0}) {
      const double d = m * std::pow(10.0, e);
      if ((m != 1 && !fine) || std::log10(d) > a.d_hi + 1e-9) continue;
      const double y = a.days(d);
      out += line(LEFT, y, RIGHT, y, m == 1 ? "stroke=\"#e0e0e0\"" : "stroke=\"#f0f0f0\"");
      out += text(LEFT - 8, y + 4, "end", days_label(d));
    }
  }
  out += line(LEFT, BOTTOM, RIGHT, BOTTOM, "stroke=\"#333\"");
  out += line(LEFT, TOP, LEFT, BOTTOM, "stroke=\"#333\"");
  out += text((LEFT + RIGHT) / 2, BOTTOM + 40, "middle", "GPUs");
  out += fmt::format(
      "<text x=\"20\" y=\"{:.1f}\" text-anchor=\"middle\" transform=\"rotate(-90 20 {:.1f})\">"
      "days to train (expected, with failures)</text>\n",
      (TOP + BOTTOM) / 2, (TOP + BOTTOM) / 2);
  if (a.c_hi > 0) {
    out += line(RIGHT, TOP, RIGHT, BOTTOM, "stroke=\"#333\"");
    for (int i = 0; i <= 5; ++i) {
      const double usd = a.c_hi * i / 5;
      out += text(RIGHT + 8, a.cost(usd) + 4, "start", money(usd));
    }
    out += fmt::format(
        "<text x=\"{0:.1f}\" y=\"{1:.1f}\" text-anchor=\"middle\" "
        "transform=\"rotate(90 {0:.1f} {1:.1f})\">cost (dashed)</text>\n",
        WIDTH - 15, (TOP + BOTTOM) / 2);
  }
  return out;
}

std::string polyline(const std::vector<ChartPoint>& points, const Axes& a, bool cost,
                     const char* color) {
  std::string out;
  std::string coords;
  for (const ChartPoint& p : points) {
    const double x = a.x(p.gpus), y = cost ? a.cost(p.value) : a.days(p.value);
    coords += fmt::format("{}{:.1f},{:.1f}", coords.empty() ? "" : " ", x, y);
    out += cost ? fmt::format(
                      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"6\" height=\"6\" "
                      "fill=\"white\" stroke=\"{}\"/>\n",
                      x - 3, y - 3, color)
                : fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\"/>\n", x, y,
                              color);
  }
  return fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{}/>\n",
                     coords, color, cost ? " stroke-dasharray=\"6 4\"" : "") +
         out;
}

}  // namespace

std::string render_plan_chart(const std::string& title, const std::vector<ChartSeries>& all,
                              std::optional<std::pair<std::size_t, double>> marked,
                              std::optional<double> days_limit) {
  std::vector<std::pair<std::size_t, const ChartSeries*>> series;
  for (std::size_t i = 0; i < all.size(); ++i)
    if (!all[i].days.empty()) series.emplace_back(i, &all[i]);
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" "
      "viewBox=\"0 0 {0:.0f} {1:.0f}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      WIDTH, HEIGHT);
  out += text(WIDTH / 2, 24, "middle", title, " font-size=\"14\"");
  if (series.empty()) {
    out += text(WIDTH / 2, HEIGHT / 2, "middle", "no configuration fits");
    return out + "</svg>\n";
  }
  const Axes a = axes_of(all, days_limit);
  out += grid_and_axes(a);
  if (days_limit && *days_limit > 0 && std::isfinite(*days_limit)) {
    const double y = a.days(*days_limit);
    out += line(LEFT, y, RIGHT, y,
                "stroke=\"#c62828\" stroke-dasharray=\"5 3\" stroke-width=\"1.5\" "
                "class=\"days-limit\"");
    out += text(RIGHT - 4, y - 5, "end", fmt::format("--days {}", days_label(*days_limit)),
                " fill=\"#c62828\"");
  }
  double legend_x = LEFT;
  for (std::size_t k = 0; k < series.size(); ++k) {
    const auto& [index, s] = series[k];
    const char* color = COLORS[index % (sizeof(COLORS) / sizeof(COLORS[0]))];
    out += polyline(s->days, a, false, color);
    if (a.c_hi > 0 && !s->cost.empty()) out += polyline(s->cost, a, true, color);
    if (marked && marked->first == index) {
      for (const ChartPoint& p : s->days) {
        if (p.gpus != marked->second) continue;
        const double x = a.x(p.gpus), y = a.days(p.value);
        out += fmt::format(
            "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"8\" fill=\"none\" stroke=\"black\" "
            "stroke-width=\"2\" class=\"chosen\"/>\n",
            x, y);
        const bool right = x < (LEFT + RIGHT) / 2;
        out += text(right ? x + 12 : x - 12, y - 10, right ? "start" : "end",
                    fmt::format("chosen: {} × {}, {} days", format_grouped(std::llrint(p.gpus)),
                                s->name, days_label(std::round(p.value * 10) / 10)),
                    " font-weight=\"bold\" class=\"chosen-label\"");
      }
    }
    out += line(legend_x, HEIGHT - 30, legend_x + 24, HEIGHT - 30,
                fmt::format("stroke=\"{}\" stroke-width=\"2\"", color).c_str());
    out += text(legend_x + 30, HEIGHT - 26, "start", s->name);
    legend_x += 40 + 8 * static_cast<double>(s->name.size()) + 20;
  }
  // GPU counts where a type has no plan that fits or finishes: crosses on the GPU axis, one row
  // per type (also for a type with no point at all).
  for (std::size_t i = 0; i < all.size(); ++i) {
    const char* color = COLORS[i % (sizeof(COLORS) / sizeof(COLORS[0]))];
    for (double g : all[i].infeasible) {
      out += fmt::format(
          "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"{}\" "
          "class=\"infeasible\">×<title>{} × {}: no plan fits or finishes</title></text>\n",
          a.x(g), BOTTOM - 4 - 12 * static_cast<double>(i), color, format_grouped(std::llrint(g)),
          html_escape(all[i].name));
    }
  }
  out +=
      text(RIGHT + 80, HEIGHT - 26, "end",
           a.c_hi > 0 ? "solid: days (left axis); dashed: cost (right axis)" : "days (left axis)");
  return out + "</svg>\n";
}

}  // namespace loom::cli
