#pragma once
// The drawn parts of the HTML report (report_html.hpp), each a piece of HTML with inline
// SVG; shared by report_html.cpp, report_timeline.cpp and report_charts.cpp only.
#include <array>
#include <string>

#include "models/memory.hpp"
#include "strategies/op_breakdown.hpp"
#include "strategies/step_simulator.hpp"

namespace loom::cli::report {

/// The timeline's slice categories, in legend order; each has a legend button and a CSS
/// class (c-compute, c-tp, ...) that the report's style colours and can hide.
inline constexpr std::array<strategies::TraceCategory, 8> TIMELINE_CATEGORIES = {
    strategies::TraceCategory::COMPUTE,   strategies::TraceCategory::TP,
    strategies::TraceCategory::CP,        strategies::TraceCategory::EP,
    strategies::TraceCategory::PP,        strategies::TraceCategory::DP,
    strategies::TraceCategory::OPTIMIZER, strategies::TraceCategory::OFFLOAD};

/// A coordinate or length in SVG user units with one decimal ("12.5"); 0 when not finite.
std::string num(double value);

/// The legend buttons (one per category that has slices) and the timeline SVG: one block of
/// lanes per pipeline stage, the representative GPU's streams (compute, tp, cp, ep, pp, dp,
/// ...), slices closer than half a pixel merged.
std::string timeline_html(const strategies::StepReport& r);

/// Memory per stage as stacked bars (weights, gradients, optimizer, activations, other)
/// against `capacity_bytes`, then the same numbers as a table.
std::string memory_html(const models::MemoryReport& memory, double capacity_bytes);

/// Communication per parallel dimension, exposed and overlapped, against the step time, then
/// the same numbers as a table.
std::string comm_html(const strategies::StepReport& r);

/// The op lists of `loom simulate --ops` (strategies::op_breakdown), one table each: every op's
/// kernel seconds per pass, its share of the list and its collective; above each table the
/// list's passes as run, host-bound or not.
std::string ops_html(const std::vector<strategies::OpListBreakdown>& lists);

}  // namespace loom::cli::report
