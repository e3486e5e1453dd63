#pragma once
// The one-line label of a resolved plan that `loom search` and `loom plan` print in their
// tables: "tp8 pp8 dp16 mbs1 1f1b z1 rc:selective sp ogr opg".
#include <string>

#include "models/training_plan.hpp"

namespace loom::cli {

/// "interleaved/4" for the interleaved schedule with 4 virtual stages, else the schedule's name.
std::string schedule_text(const models::TrainingPlan& plan);

/// The plan's searched dimensions in one line (z: ZeRO stage, rc: recompute and which layers,
/// ogr, opg, tpo, a2ao: the overlaps that are on; offN: N layers CPU-offloaded; flex: the
/// flex token dispatcher).
std::string plan_label(const models::TrainingPlan& plan);

/// The key to plan_label's abbreviations, printed under a table of labels (no newline).
inline constexpr const char* PLAN_LABEL_LEGEND =
    "z: ZeRO stage; rc: recompute (/everyK, /blockN, /uniformN: which layers); ogr, opg, tpo, "
    "a2ao: overlap-grad-reduce, overlap-param-gather, tp-comm-overlap, "
    "overlap-moe-expert-parallel-comm on; offN: N layers CPU-offloaded; flex: flex token "
    "dispatcher";

}  // namespace loom::cli
