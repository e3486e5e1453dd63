#pragma once
// The `memory` block of the JSON contract (DESIGN.md): parameters, capacity_bytes, fits,
// peak_bytes and per_stage (parameters, weights_bytes, gradients_bytes, optimizer_bytes,
// activations_bytes, other_bytes, total_bytes). Shared by `loom memory` and `loom simulate`
// so both print the same fields the same way; and the one wording of "does not fit" and of
// --require-fit that both use. Include only from .cpp files.
#include <optional>
#include <string>

#include "common/document.hpp"
#include "models/memory.hpp"

namespace loom::cli {

/// The contract fields of a memory report against `capacity_bytes` (null "capacity_bytes"
/// and "fits" when unknown); "per_stage" holds one object per stage, in stage order, to which
/// a caller may append its own fields.
OrderedJson memory_report_json(const models::MemoryReport& report,
                               std::optional<double> capacity_bytes);

/// "stage 3 needs 90.12 GiB but the GPU has 74.51 GiB" when the peak stage needs more than
/// `capacity_bytes`; empty when the plan fits.
std::string misfit_text(const models::MemoryReport& report, double capacity_bytes);

/// --require-fit: throws InfeasibleError ("--require-fit: " + misfit_text, exit code 3) when
/// the plan does not fit `capacity_bytes`.
void require_fit(const models::MemoryReport& report, double capacity_bytes);

}  // namespace loom::cli
