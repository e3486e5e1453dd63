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
  for (size_t i = 0; i < lists.size(); ++i) {
    const auto& l = lists[i];
    const bool types = lists.front().gpu != lists.back().gpu;  // a mixed cluster
    const double bwd = l.pass.bwd_input_s + l.pass.bwd_weight_s;
    out += fmt::format(
        "<h3>{}{}{}</h3>\n<p class=\"note\">forward {}, backward {}{}{}</p>\n",
        types ? html_escape(l.gpu) + ": " : std::string(), html_escape(l.what),
        l.count > 1 ? fmt::format(" × {}", l.count) : std::string(), format_time(l.pass.fwd_s),
        format_time(bwd),
        l.pass.fwd_s > l.fwd_kernel_s * (1 + 1e-9) || bwd > l.bwd_kernel_s * (1 + 1e-9)
            ? fmt::format(" (host-bound: kernels {} and {})", format_time(l.fwd_kernel_s),
                          format_time(l.bwd_kernel_s))
            : std::string(),
        l.whole_graph
            ? "; one CUDA graph per pass"
            : fmt::format("; {:.4g} + {:.4g} launches", l.pass.fwd_launches, l.pass.bwd_launches));
    out += fmt::format(
        "<table id=\"ops-table-{}\">\n<thead><tr><th>op</th><th>kind</th><th>forward</th><th>bwd "
        "input</th><th>bwd weight</th><th>share</th><th>fwd "
        "rate</th><th>collective</th></tr></thead>\n<tbody>\n",
        i);
    const double total = l.fwd_kernel_s + l.bwd_kernel_s;
    for (const auto& o : l.ops) {
      const double s = o.fwd_s + o.bwd_input_s + o.bwd_weight_s;
      if (strategies::fused_away(o)) continue;
      out += fmt::format(
          "<tr><td>{}</td><td class=\"text\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
          "<td>{}</td><td class=\"text\">{}</td></tr>\n",
          html_escape(o.name), models::to_string(o.kind), format_time(o.fwd_s),
          format_time(o.bwd_input_s), format_time(o.bwd_weight_s),
          total > 0 ? format_percent(s / total) : std::string("-"), forward_rate(o),
          o.comm == models::CommKind::NONE
              ? std::string()
              : fmt::format("{} {}", models::to_string(o.comm), format_bytes(o.comm_bytes)));
    }
    out += "</tbody>\n</table>\n";
  }
  return out;
}

}  // namespace loom::cli::report
