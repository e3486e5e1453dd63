#pragma once
// The loom plan JSON (docs/plans.md), both ways, driven by the table of plan fields: the
// reader behind `--plan FILE` and the writer behind `--print-config` and the "plan" block
// of every `--format json` context. What the writer prints, the reader accepts and
// resolves to the same plan. Include only from .cpp files (nlohmann/json).
#include <string>

#include "common/document.hpp"
#include "common/json_util.hpp"
#include "models/training_plan.hpp"
#include "strategies/plan/plan_input.hpp"

namespace loom::strategies {

/// Reads a loom plan JSON file: a plan object (keys as in plan_fields(), quantities with
/// units) or the {"plan": {...}} document --print-config prints. Derived keys
/// ("micro_batches", "gpus") are kept so that resolve_plan checks they agree. Every value
/// records its source as "FILE#/pointer". Throws ConfigError (missing file, malformed
/// JSON with line/column, unknown key with did-you-mean, a value of the wrong type).
PlanInput read_plan_json(const std::string& path);
/// read_plan_json on the text of a plan file; `origin` names it in errors and sources.
PlanInput parse_plan_json(const std::string& text, const std::string& origin);

/// Reads the plan keys of the JSON object `r` reads (a plan object inside another file);
/// sources "FILE#/pointer". Throws ConfigError as read_plan_json does.
PlanInput read_plan_fields(ObjectReader& r);

/// The resolved plan as the JSON "plan" object (every field, defaults and derived keys
/// included, in table order).
OrderedJson plan_to_json(const models::TrainingPlan& plan);

/// {"plan": plan_to_json(plan)} with a two-space indent and a trailing newline.
std::string render_plan_config(const models::TrainingPlan& plan);

}  // namespace loom::strategies
