#pragma once
// `loom simulate --trace FILE`: the simulated step as Chrome-trace / Perfetto JSON. One
// process per rank, named by its place in the plan; one thread per serial stream; "X" slices
// in microseconds (compute passes, collectives, pipeline sends and receives); "C" memory
// counters in whole bytes. A pass's model-parallel collectives are slices of their own on the
// rank's "tp", "cp" or "ep" thread, among the pass's GEMMs (strategies::PassLayout), and the
// pass's slice spans them.
#include <string>

#include "models/training_plan.hpp"
#include "strategies/step_simulator.hpp"

namespace loom::cli {

/// Writes `r`'s timeline and memory samples to `path`. Processes are named "rank 8: stage 1,
/// tp 0, cp 0, dp 1" (ep too when ep > 1) from the layout of `plan` in rank order `order`;
/// threads are the streams (compute; tp, cp and ep for the passes' collectives; tp-overlap,
/// ep-overlap, dp, dp-ag, pp-send, pp-recv, and numbered lanes "pp-send 2" where transfers
/// overlap). Throws ValidationError on "--trace" when the
/// file cannot be written.
void write_chrome_trace(const std::string& path, const strategies::StepReport& r,
                        const models::TrainingPlan& plan, const std::string& order);

}  // namespace loom::cli
