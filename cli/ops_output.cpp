#include "cli/ops_output.hpp"

#include <fmt/format.h>

#include "common/csv.hpp"
#include "common/table.hpp"
#include "common/units.hpp"

namespace loom::cli {
namespace {

std::string launches(double n) {
  return fmt::format("{:.4g}", n);
}

// "1.84 ms" or "1.84 ms (host-bound; kernels 1.20 ms)".
std::string pass_text(double as_run_s, double kernel_s) {
  if (as_run_s > kernel_s * (1 + 1e-9))
    return fmt::format("{} (host-bound; kernels {})", format_time(as_run_s), format_time(kernel_s));
  return format_time(as_run_s);
}

}  // namespace

std::string forward_rate(const strategies::OpTiming& op) {
  if (op.fwd_s <= 0) return "-";
  const bool math = op.kind == models::OpKind::MATMUL || op.kind == models::OpKind::ATTENTION;
  if (math) return op.fwd_flops > 0 ? format_flop_rate(op.fwd_flops / op.fwd_s) : "-";
  return op.fwd_bytes > 0 ? format_bandwidth(op.fwd_bytes / op.fwd_s) : "-";
}

std::string passes_text(const strategies::OpListBreakdown& l) {
  return fmt::format("forward {}, backward {}; {}", pass_text(l.pass.fwd_s, l.fwd_kernel_s),
                     pass_text(l.pass.bwd_input_s + l.pass.bwd_weight_s, l.bwd_kernel_s),
                     l.whole_graph ? std::string("one CUDA graph per pass")
                                   : fmt::format("launches {} + {}", launches(l.pass.fwd_launches),
                                                 launches(l.pass.bwd_launches)));
}

std::string share_text(const strategies::OpTiming& op, const strategies::OpListBreakdown& l) {
  const double total = l.fwd_kernel_s + l.bwd_kernel_s;
  return total > 0 ? format_percent((op.fwd_s + op.bwd_input_s + op.bwd_weight_s) / total) : "-";
}

std::string collective_text(const strategies::OpTiming& op) {
  if (op.comm == models::CommKind::NONE) return "";
  return fmt::format("{} {}", models::to_string(op.comm), format_bytes(op.comm_bytes));
}

std::string render_ops_table(const std::vector<strategies::OpListBreakdown>& lists) {
  std::string out =
      "ops of one micro-batch on one GPU, as the pass costing times them before the engine\n"
      "schedules them (collectives: their size only; the engine times them)\n";
  for (size_t i = 0; i < lists.size(); ++i) {
    const auto& l = lists[i];
    if (i == 0 || lists[i - 1].gpu != l.gpu) out += fmt::format("\n== on one {}\n", l.gpu);
    out += fmt::format("\n{}{}: {}\n", l.what,
                       l.count > 1 ? fmt::format(" x {}", l.count) : std::string(), passes_text(l));
    if (l.pass.recompute_s > 0)
      out += fmt::format("recompute {}\n", format_time(l.pass.recompute_s));
    Table t({"op", "kind", "forward", "bwd input", "bwd weight", "share", "fwd rate", "launches",
             "collective"});
    t.align_left(1);
    t.align_left(8);
    for (const auto& o : l.ops) {
      if (strategies::fused_away(o)) continue;
      t.add_row(
          {o.name, models::to_string(o.kind), format_time(o.fwd_s), format_time(o.bwd_input_s),
           format_time(o.bwd_weight_s), share_text(o, l), forward_rate(o),
           o.graphed ? "graphed"
                     : fmt::format("{} + {}", launches(o.fwd_launches), launches(o.bwd_launches)),
           collective_text(o)});
    }
    out += t.render();
  }
  return out;
}

std::string render_ops_csv(const std::vector<strategies::OpListBreakdown>& lists) {
  CsvTable t("simulate-ops", 1,
             {"gpu", "list", "alike", "op", "kind", "forward_s", "backward_input_s",
              "backward_weight_s", "forward_launches", "backward_launches", "graphed", "collective",
              "collective_bytes", "forward_flops", "forward_bytes"});
  for (const auto& l : lists)
    for (const auto& o : l.ops)
      t.add_row({l.gpu, l.what, std::to_string(l.count), o.name, models::to_string(o.kind),
                 csv_number(o.fwd_s), csv_number(o.bwd_input_s), csv_number(o.bwd_weight_s),
                 csv_number(o.fwd_launches), csv_number(o.bwd_launches),
                 o.graphed ? "true" : "false", models::to_string(o.comm), csv_number(o.comm_bytes),
                 csv_number(o.fwd_flops), csv_number(o.fwd_bytes)});
  return t.render();
}

OrderedJson ops_results_json(const std::vector<strategies::OpListBreakdown>& lists) {
  OrderedJson out = OrderedJson::array();
  for (const auto& l : lists) {
    OrderedJson ops = OrderedJson::array();
    for (const auto& o : l.ops)
      ops.push_back({{"op", o.name},
                     {"kind", models::to_string(o.kind)},
                     {"forward_s", o.fwd_s},
                     {"backward_input_s", o.bwd_input_s},
                     {"backward_weight_s", o.bwd_weight_s},
                     {"forward_launches", o.fwd_launches},
                     {"backward_launches", o.bwd_launches},
                     {"graphed", o.graphed},
                     {"collective", models::to_string(o.comm)},
                     {"collective_bytes", o.comm_bytes},
                     {"forward_flops", o.fwd_flops},
                     {"forward_bytes", o.fwd_bytes}});
    out.push_back({{"gpu", l.gpu},
                   {"list", l.what},
                   {"alike", l.count},
                   {"forward_s", l.pass.fwd_s},
                   {"backward_s", l.pass.bwd_input_s + l.pass.bwd_weight_s},
                   {"recompute_s", l.pass.recompute_s},
                   {"forward_kernel_s", l.fwd_kernel_s},
                   {"backward_kernel_s", l.bwd_kernel_s},
                   {"forward_launches", l.whole_graph ? 1.0 : l.pass.fwd_launches},
                   {"backward_launches", l.whole_graph ? 1.0 : l.pass.bwd_launches},
                   {"whole_graph", l.whole_graph},
                   {"ops", ops}});
  }
  return {{"op_lists", out}};
}

}  // namespace loom::cli
