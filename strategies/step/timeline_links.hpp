#pragma once
// What the Chrome trace shows beyond the slices' times (issue 33): each slice's arguments (the
// pass, micro-batch, chunk and layers of a compute slice; the op, bytes and group of a
// collective or transfer) and the arrows between slices (a pipeline send to its receive, a
// collective or transfer to the tasks that waited for it, on the same rank).
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

}  // namespace loom::strategies
