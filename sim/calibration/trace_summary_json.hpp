#pragma once
// The `trace_summaries` section of a profile file as JSON (docs/calibration.md). Include
// only from .cpp files (nlohmann/json).
#include <nlohmann/json.hpp>

#include <string>

#include "sim/calibration/trace_summary.hpp"

namespace loom::calibration {

/// One summary as the profile writes it (times in microseconds, derived rates included).
nlohmann::ordered_json trace_summary_to_json(const TraceSummary& summary);

/// One summary from the profile; `pointer` locates it in `file`. Throws ConfigError naming
/// file and JSON pointer on a missing or bad value.
TraceSummary trace_summary_from_json(const nlohmann::json& json, const std::string& file,
                                     const std::string& pointer);

}  // namespace loom::calibration
