#pragma once
// Per-GPU memory of a plan: models/memory.hpp's accounting with the in-flight micro-batches
// of each pipeline stage taken from the plan's schedule (strategies/schedule.hpp), the one
// place that number is decided.
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
/// in-flight micro-batches). Throws ValidationError for an invalid plan.
models::MemoryReport estimate_memory(const models::ModelSpec& model,
                                     const models::TrainingPlan& plan);

}  // namespace loom::strategies
