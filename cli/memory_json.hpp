#pragma once
// The `memory` block of the JSON contract (DESIGN.md): parameters, capacity_bytes, fits,
// peak_bytes and per_stage (parameters, weights_bytes, gradients_bytes, optimizer_bytes,
// activations_bytes, other_bytes, total_bytes). Shared by `loom memory` and `loom simulate`
// so both print the same fields the same way. Include only from .cpp files.
#include <optional>

#include "common/document.hpp"
#include "models/memory.hpp"

namespace loom::cli {

/// The contract fields of a memory report against `capacity_bytes` (null "capacity_bytes"
/// and "fits" when unknown); "per_stage" holds one object per stage, in stage order, to which
/// a caller may append its own fields.
OrderedJson memory_report_json(const models::MemoryReport& report,
                               std::optional<double> capacity_bytes);

}  // namespace loom::cli
