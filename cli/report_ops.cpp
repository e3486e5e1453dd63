// The report's "where a layer's time goes": the op lists of `loom simulate --ops`, one table
// each, with every op's kernel seconds per pass and its share of the list.
#include <fmt/format.h>

#include "cli/html_escape.hpp"
#include "cli/ops_output.hpp"
#include "cli/report_parts.hpp"
#include "common/units.hpp"

namespace loom::cli::report {

std::string ops_html(const std::vector<strategies::OpListBreakdown>& lists) {
  std::string out;
  const bool types = !lists.empty() && lists.front().gpu != lists.back().gpu;  // a mixed cluster
  for (size_t i = 0; i < lists.size(); ++i) {
    const auto& l = lists[i];
    out += fmt::format("<h3>{}{}{}</h3>\n<p class=\"note\">{}</p>\n",
                       types ? html_escape(l.gpu) + ": " : std::string(), html_escape(l.what),
                       l.count > 1 ? fmt::format(" × {}", l.count) : std::string(), passes_text(l));
    out += fmt::format(
        "<table id=\"ops-table-{}\">\n<thead><tr><th>op</th><th>kind</th><th>forward</th><th>bwd "
        "input</th><th>bwd weight</th><th>share</th><th>fwd "
        "rate</th><th>collective</th></tr></thead>\n<tbody>\n",
        i);
    for (const auto& o : l.ops) {
      if (strategies::fused_away(o)) continue;
      out += fmt::format(
          "<tr><td>{}</td><td class=\"text\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
          "<td>{}</td><td class=\"text\">{}</td></tr>\n",
          html_escape(o.name), models::to_string(o.kind), format_time(o.fwd_s),
          format_time(o.bwd_input_s), format_time(o.bwd_weight_s), share_text(o, l),
          forward_rate(o), collective_text(o));
    }
    out += "</tbody>\n</table>\n";
  }
  return out;
}

}  // namespace loom::cli::report
