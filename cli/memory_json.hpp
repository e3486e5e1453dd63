#pragma once
// The `memory` block of the JSON contract (DESIGN.md): parameters, capacity_bytes, fits,
// peak_bytes and per_stage (parameters, weights_bytes, gradients_bytes, optimizer_bytes,
// activations_bytes, other_bytes, total_bytes). Shared by `loom memory` and `loom simulate`
// so both print the same fields the same way. Include only from .cpp files.
#include <functional>
#include <optional>

#include "common/document.hpp"
#include "models/memory.hpp"

namespace loom::cli {

/// One stage's contract fields, in bytes (parameters in parameters).
OrderedJson memory_stage_json(const models::StageMemory& stage);

/// The contract fields of a memory report against `capacity_bytes` (null "capacity_bytes"
/// and "fits" when unknown). `add_stage_fields` may append fields to each stage's object.
OrderedJson memory_report_json(
    const models::MemoryReport& report, std::optional<double> capacity_bytes,
    const std::function<void(const models::StageMemory&, OrderedJson&)>& add_stage_fields = {});

}  // namespace loom::cli
