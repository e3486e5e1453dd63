#pragma once
// The plan as the tables and CSV rows of `memory` and `simulate` print it: one summary line,
// and the plan's fields as CSV columns (the keys of the plan JSON, in its order).
#include <string>
#include <vector>

#include "common/document.hpp"
#include "models/training_plan.hpp"

namespace loom::cli {

/// "tp 8 pp 4 dp 2 cp 1 ep 1; mbs 1 gbs 2 (1 micro-batch) seq 4096; bf16 adam grad fp32
/// zero 0 recompute none schedule 1f1b" (vpp, +sp and "no flash attention" when they apply).
std::string plan_summary(const models::TrainingPlan& plan);

/// "fp8", "fp8/tensorwise", "nvfp4 +scale-swizzle": the precision with an explicit FP8
/// recipe and the scale swizzles when set.
std::string precision_text(const models::TrainingPlan& plan);

/// The plan as command outputs print it (the "plan" object of every --format json, and the
/// plan columns of CSV): plan_to_json's keys, except that a size field is a number of bytes
/// under its key with "_bytes" appended ("dp_bucket_size_bytes": 167772160), not the plan
/// file's string with a unit ("160MiB"), so that tools load it without parsing units.
OrderedJson plan_output_json(const models::TrainingPlan& plan);

/// Tokens per second per GPU: `tokens_per_s` over the plan's GPUs (tp x pp x dp x cp).
double tokens_per_s_per_gpu(double tokens_per_s, const models::TrainingPlan& plan);

/// Appends the plan's fields (plan JSON keys, e.g. "tp", "seq", "zero") to `header` and their
/// values to `row`: integers and names as written, switches true/false, lists comma-joined.
void append_plan_columns(const models::TrainingPlan& plan, std::vector<std::string>& header,
                         std::vector<std::string>& row);

}  // namespace loom::cli
