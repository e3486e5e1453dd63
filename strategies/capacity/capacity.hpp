#pragma once
// `loom plan`'s engine: how many GPUs of which kind, for how many days and how much money,
// to train a model on a number of tokens. For each GPU type (a cluster preset or file) and
// GPU count (whole nodes) the search (strategies/search) finds the fastest plan; its
// simulated tokens per second give the failure-free (ideal) time, the goodput model
// (goodput.hpp) the expected time with failures and checkpoints, and from it GPU-hours,
// energy (board power x hours x PUE) and, where the user gave a price per GPU-hour, cost.
// docs/plan.md states every formula and default.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "models/model_spec.hpp"
#include "models/training_plan.hpp"
#include "strategies/capacity/goodput.hpp"
#include "strategies/plan/plan_input.hpp"
#include "strategies/search/search.hpp"

namespace loom::strategies {

/// Facility power over IT power assumed when none is given: 1.1, the hyperscale cloud data
/// centres' figure Patterson et al. 2021 ("Carbon Emissions and Large Neural Network
/// Training", arXiv:2104.10350) use for the large models they study (docs/plan.md).
inline constexpr double DEFAULT_PUE = 1.1;

/// The largest GPU count of the default sweep (the scale of Llama 3 405B's pre-training).
inline constexpr std::int64_t DEFAULT_SWEEP_MAX_GPUS = 16384;

/// One kind of GPU to plan with: the cluster that scales it.
struct CapacityTarget {
  std::string label;         ///< as the user named it ("h100", "gb200-nvl72", "x.json")
  std::string cluster_spec;  ///< the cluster preset or cluster JSON path it scales
  std::string gpu;           ///< the GPU's catalog key ("h100-sxm")
  std::string gpu_display;   ///< "H100 SXM5 80GB"
  int gpus_per_node = 0;
  double board_watts = 0;  ///< power per GPU: the TDP, or the power limit when lower, watts
};

/// The target `name` names: a GPU (catalog key or alias: its cluster preset), a cluster
/// preset (in any case, as --cluster takes it), or a cluster JSON file (a path ending in
/// .json). Throws ValidationError naming `field` for an unknown name or a GPU without a
/// preset, ConfigError for a bad file.
CapacityTarget resolve_target(const std::string& name, const std::string& field = "gpu");

/// The GPU counts to try on `target`: `requested` rounded up to whole nodes (duplicates
/// dropped, ascending), or when empty 1, 2, 4, ... nodes up to max_gpus.
std::vector<std::int64_t> gpu_counts(const CapacityTarget& target,
                                     const std::vector<std::int64_t>& requested,
                                     std::int64_t max_gpus = DEFAULT_SWEEP_MAX_GPUS);

/// How to plan.
struct CapacityOptions {
  double tokens = 0;         ///< tokens to train on, > 0
  GoodputInputs goodput;     ///< checkpoint_bytes is filled per configuration
  double pue = DEFAULT_PUE;  ///< >= 1
  SearchOptions search;      ///< the search of each configuration (top, exact, threads)
  /// Called before each configuration is searched: its index and the count of them.
  std::function<void(std::size_t index, std::size_t total)> progress;
};

/// One GPU type at one GPU count.
struct CapacityRow {
  std::size_t target = 0;  ///< index into the targets
  std::int64_t gpus = 0;
  std::int64_t nodes = 0;
  bool feasible = false;  ///< a plan fits and the run finishes
  std::string reason;     ///< why not, when not feasible
  /// What kind of "not": BAD_INPUT (no candidate is a valid plan), INFEASIBLE (none fits, the
  /// simulator ran none, or the run never finishes); OK when feasible.
  ExitCode failure = ExitCode::OK;
  models::TrainingPlan plan;
  double step_time_s = 0;
  double tokens_per_s = 0;
  double mfu = 0;
  double peak_memory_bytes = 0;
  double checkpoint_bytes = 0;  ///< model state: weights + optimizer (master, moments), bytes
  Goodput run;                  ///< ideal and expected time, MTBF, checkpoint interval
  double ideal_gpu_hours = 0;
  double gpu_hours = 0;        ///< GPUs x expected hours (what is paid for)
  double energy_joules = 0;    ///< board power x GPUs x expected seconds x PUE
  std::optional<double> cost;  ///< price x gpu_hours, when the target has a price
};

/// The configuration of `model` (plan values `input` fixes) on `gpus` GPUs of `target`:
/// searched, then timed, checkpointed and costed. A configuration without a fitting or
/// valid plan, or whose run never finishes, is returned with feasible false and its reason.
/// Throws what cluster loading throws (a count the cluster cannot have).
CapacityRow plan_configuration(const models::ModelSpec& model, const PlanInput& input,
                               const CapacityTarget& target, std::int64_t gpus,
                               const CapacityOptions& options,
                               std::optional<double> price_per_gpu_hour = std::nullopt);

/// Every target at each of its counts (gpu_counts of `requested`), in target order then by
/// GPUs. `prices[i]` is target i's price per GPU-hour (USD), if any.
std::vector<CapacityRow> plan_capacity(const models::ModelSpec& model, const PlanInput& input,
                                       const std::vector<CapacityTarget>& targets,
                                       const std::vector<std::int64_t>& requested,
                                       const std::vector<std::optional<double>>& prices,
                                       const CapacityOptions& options);

/// Prices per GPU-hour by target: each "name=USD" pair's name matched to a target by its
/// label, GPU key or GPU alias. Throws ValidationError naming `field` on an unknown or
/// repeated name or a price that is not a positive number.
std::vector<std::optional<double>> resolve_prices(
    const std::vector<CapacityTarget>& targets,
    const std::vector<std::pair<std::string, std::string>>& prices,
    const std::string& field = "price");

/// The feasible row finishing (expected time) within `max_days` days at the lowest cost, or
/// with `by_gpu_hours` the fewest GPU-hours; ties by expected time, then row order. nullopt
/// when none finishes in time.
std::optional<std::size_t> cheapest_within(const std::vector<CapacityRow>& rows, double max_days,
                                           bool by_gpu_hours);

/// The feasible row with a cost within `budget` finishing first (expected time); ties by cost,
/// then row order. nullopt when none is within budget.
std::optional<std::size_t> fastest_within(const std::vector<CapacityRow>& rows, double budget);

}  // namespace loom::strategies
