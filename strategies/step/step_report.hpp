#pragma once
// The step report, the last stage of a simulated step: after the engine ran, measures the
// representative GPUs — step time, pipeline bubble, compute, model-parallel and exposed
// data-parallel communication, throughput, MFU/HFU — and, when asked, the timeline and the
// memory counters for the Chrome trace.
#include "strategies/step/step_graph.hpp"

namespace loom::strategies {

/// Fills `report`'s timings from `graph` after its engine ran (memory is filled by the
/// caller).
void measure_step(StepGraph& graph, StepReport& report);

/// The executed slices and per-stage memory counters of the representative, for the trace.
void record_timeline(const StepGraph& graph, StepReport& report);

}  // namespace loom::strategies
