#pragma once
// Per-GPU memory of a plan: models/memory.hpp's accounting with the in-flight micro-batches
// of each pipeline stage taken from the plan's schedule (strategies/schedule.hpp), the one
// place that number is decided.
#include <string>
#include <utility>
#include <vector>

#include "models/memory.hpp"
#include "models/model_spec.hpp"
#include "models/training_plan.hpp"

namespace loom::strategies {

/// Micro-batches whose activations each pipeline stage holds at its peak, by stage, read
/// from the plan's pipeline schedule (peak_in_flight). Throws ValidationError for a shape
/// the schedule rejects.
std::vector<double> in_flight_micro_batches(const models::TrainingPlan& plan);

/// Memory per GPU for every pipeline stage (models::estimate_memory with the schedule's
/// in-flight micro-batches), as the data-parallel design leaves it on its busiest GPU:
/// parameter-server workers hold no optimizer state (the servers do; GEO workers keep their
/// local one); single-process DataParallel's GPU 0 holds the optimizer state and, beyond its
/// own micro-batch's, the other replicas' gathered outputs and their loss. Throws
/// ValidationError for an invalid plan.
models::MemoryReport estimate_memory(const models::ModelSpec& model,
                                     const models::TrainingPlan& plan);

/// What the data-parallel design changes of models::estimate_memory's `report` for `plan`
/// (estimate_memory's adjustments, for callers that estimate the rest themselves, as the
/// search's fast tier does).
void apply_dp_mode_memory(models::MemoryReport& report, const models::TrainingPlan& plan);

/// Memory of each kind of GPU when the data-parallel design makes them differ, (device,
/// bytes): DataParallel's GPU 0 and its replicas; parameter-server workers. Empty for DDP.
/// `memory` is estimate_memory(model, plan).
std::vector<std::pair<std::string, double>> device_memory(const models::MemoryReport& memory,
                                                          const models::TrainingPlan& plan);

}  // namespace loom::strategies
