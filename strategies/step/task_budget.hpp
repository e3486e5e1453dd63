#pragma once
// The step's task budget, checked before the step is lowered: a lower bound on the engine
// tasks lowering will add, counted from the schedule and the costed passes alone, so that a
// step above MAX_ENGINE_TASKS (common/limits.hpp) is refused before its tasks are built (a
// --full step on 524,288 GPUs took 92 s and 9.8 GB to reach the limit task by task).
#include <cstdint>

namespace loom::strategies {

struct StepGraph;

/// At least how many engine tasks lowering every step of `g` adds: per simulated GPU and
/// pass, one compute task per part lowered (the chunk, or each unit of a split pass) and one
/// more for a recompute; per part's run of collectives on one dimension, one task per group
/// of the simulated GPUs; per micro-batch and pipeline hop, two transfers per simulated
/// replica. Data-parallel work, overlap markers and offload copies come on top. Counted in
/// floating point (no overflow whatever the plan).
double min_step_tasks(const StepGraph& g);

/// Throws ValidationError on "tasks", naming MAX_ENGINE_TASKS and saying the count was
/// estimated before the step was built, when min_step_tasks(g) is above the limit.
void check_task_budget(const StepGraph& g);

}  // namespace loom::strategies
