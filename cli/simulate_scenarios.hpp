#pragma once
// `loom simulate`'s what-if flags beyond the plan: several steps (--steps), stragglers
// (--straggler, --straggler-random), slow links (--slow-link, --slow-link-random), the
// DataParallel launch cost (--host-launch), a second plan to compare (--compare KEY=VALUE);
// and the report sections they add (step statistics, replicas, stages, the data-parallel
// design's breakdown, staleness, per-device memory) as table and JSON. Include only from
// .cpp files.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/plan_flags.hpp"
#include "common/document.hpp"
#include "strategies/step_simulator.hpp"
#include "topologies/cluster.hpp"

namespace loom::cli {

/// Raw values of the scenario flags.
struct ScenarioFlags {
  int steps = 1;
  std::vector<std::string> stragglers;  ///< RANK=FACTOR, each may be a comma list
  std::string straggler_random;         ///< FRACTION:MEAN
  std::vector<std::string> slow_links;  ///< A:B=FACTOR (vertex names)
  std::string slow_link_random;         ///< FRACTION:MEAN
  std::uint64_t seed = 1;
  std::string host_launch;  ///< a time, e.g. "10us"; empty: the default
  std::string compare;      ///< KEY=VALUE: a plan flag (without "--") and its value
};

/// Adds the scenario flags to `app`.
void add_scenario_flags(CLI::App& app, ScenarioFlags& flags);

/// Applies the flags: slow links to `cluster` (before it is simulated), the rest to
/// `options`. Throws ValidationError naming the flag for a malformed or out-of-range value.
void apply_scenario_flags(const ScenarioFlags& flags, topo::Cluster& cluster,
                          strategies::SimulateOptions& options);

/// The plan flags of the --compare run: `flags` with KEY set to VALUE. Throws
/// ValidationError naming --compare for an unknown key or a malformed pair.
PlanFlags compare_flags(const PlanFlags& flags, const std::string& compare);

/// The table sections the report holds beyond a single homogeneous DDP step (empty when
/// there is nothing to add).
std::string render_scenario_table(const strategies::StepReport& report);

/// Adds the JSON fields of those sections to `results`: "steps" (always), and "replicas",
/// "stages", "design" when the run has them.
void add_scenario_json(OrderedJson& results, const strategies::StepReport& report);

/// A side-by-side table of two runs, `a` and `b`, labelled with their names; `a_gpus` and
/// `b_gpus` (their plans' GPUs) divide tokens/s into tokens/s per GPU.
std::string render_compare_table(const strategies::StepReport& a, const std::string& a_name,
                                 const strategies::StepReport& b, const std::string& b_name,
                                 std::int64_t a_gpus, std::int64_t b_gpus);

}  // namespace loom::cli
