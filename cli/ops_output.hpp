#pragma once
// `loom simulate --ops`: every op of each distinct op list of the plan (the embedding, each
// kind of layer, the head) with its kernel seconds per pass, launches and collective, in the
// three output formats. Include only from .cpp files.
#include <string>
#include <vector>

#include "common/document.hpp"
#include "strategies/op_breakdown.hpp"

namespace loom::cli {

/// The forward's achieved rate, the kernel model's efficiency made visible: FLOP/s for
/// matmuls and attention ("612.3 TFLOP/s"), bytes moved per second for the memory-bound rest
/// ("2.1 TB/s"); "-" when the op takes no time or moves nothing.
std::string forward_rate(const strategies::OpTiming& op);
/// A list's passes in one line: "forward 1.84 ms, backward 3.10 ms (host-bound; kernels
/// 2.95 ms); launches 73 + 89" (or "; one CUDA graph per pass").
std::string passes_text(const strategies::OpListBreakdown& list);
/// An op's share of its list's kernel seconds ("21.9%"; "-" for a list without any).
std::string share_text(const strategies::OpTiming& op, const strategies::OpListBreakdown& list);
/// The collective after an op, "ep_all_to_all 90.00 MiB"; empty for none.
std::string collective_text(const strategies::OpTiming& op);

/// Plain-text tables, one per op list, with a line of pass totals above each, under a heading
/// per GPU type.
std::string render_ops_table(const std::vector<strategies::OpListBreakdown>& lists);
/// One CSV record per op: GPU, list, op, kind, seconds per pass, launches, collective, bytes.
std::string render_ops_csv(const std::vector<strategies::OpListBreakdown>& lists);
/// The "results" of the JSON document: {"op_lists": [...]}, each with its ops and pass totals.
OrderedJson ops_results_json(const std::vector<strategies::OpListBreakdown>& lists);

}  // namespace loom::cli
