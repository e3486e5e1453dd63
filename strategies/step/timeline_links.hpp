#pragma once
// What the Chrome trace shows beyond the slices' times (issue 33): each slice's arguments (the
// pass, micro-batch, chunk and layers of a compute slice; the op, bytes and group of a
// collective or transfer) and the arrows between slices (a pipeline send to its receive, a
// collective or transfer to the tasks that waited for it, on the same rank) and a pass's
// collectives one by one among its kernels.
#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sim/engine.hpp"
#include "strategies/step_simulator.hpp"

namespace loom::strategies {

/// The timeline slices of each engine task, by (task, rank): the first slice of that task on
/// that rank, as an index into StepReport::timeline.
using SliceIndex = std::map<std::pair<sim::TaskId, int>, std::size_t>;

/// The "args" of a slice of `task` labelled `label`: fields read from the label ("F mb3 c0
/// layers 0-11": pass, micro_batch, chunk, layers) and, for a collective or transfer, the
/// engine's note (op, bytes, group_size, ranks, collectives).
std::vector<std::pair<std::string, std::string>> slice_args(const sim::Engine& engine,
                                                            sim::TaskId task,
                                                            const std::string& label);

/// Adds to `r.timeline_flows` an arrow from each collective's or transfer's slice on a rank to
/// the first slice, on that rank, of every task that waited for it.
void link_dependants(const sim::Engine& engine, const SliceIndex& slices, StepReport& r);

struct StepGraph;

/// Lays out the collectives of every traced pass (StepGraph::traced_parts) one slice each
/// among the pass's kernels, into `r.pass_layouts` (PassLayout). The pass keeps its interval
/// (its compute's start to its last blocking collective's or its overlap residual's end);
/// inside it the compute seconds are split over the pass's ops in proportion to their
/// kernels' seconds (cost_ops), each blocking collective follows its op in the forward and
/// precedes it in the backward for the seconds it ran (a wait for its group before the first
/// of a run), and a TP or CP collective overlapped with a GEMM (tp_comm_overlap, a CP ring)
/// starts with that GEMM, whose seconds are followed by what the overlap leaves exposed
/// (tp_overlap_exposed_s, scaled to the residual the step ran). Overlapped EP all-to-alls,
/// hidden behind another micro-batch, keep their slices. A pass whose ops do not account for
/// its collectives is left as simulated. Nothing without SimulateOptions::trace_collectives.
void lay_out_passes(const StepGraph& g, const SliceIndex& slices, StepReport& r);

}  // namespace loom::strategies
