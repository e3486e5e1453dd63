#pragma once
// `loom search`'s engine, two tiers over a SearchSpace. The fast tier (fast_estimate.hpp)
// visits every shape of the space (threads take blocks of shapes), resolves and validates
// each candidate with the plan rules, counts the invalid ones by the plan field whose rule
// they break and the ones that do not fit in GPU memory, and ranks every fitting plan by
// its estimated step time. The exact tier re-simulates the fastest candidates (and, when
// asked, a sample of the fitting ones) with the step simulator; the final ranking is by
// simulated step time. Every ordering is by (time, candidate id), so the answer is the
// same for any thread count, and a SearchTally — what the fast tier found over part of the
// space — merges exactly: the tallies of the shards of a space add up to the tally of the
// whole (search_tally_json.cpp writes and reads them).
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "models/model_spec.hpp"
#include "strategies/search/search_space.hpp"
#include "strategies/step_simulator.hpp"
#include "topologies/cluster.hpp"

namespace loom::strategies {

/// A candidate and its ranking key (a step time in seconds, or a sampling hash).
struct RankedId {
  double key = 0;
  std::int64_t id = 0;
  /// By key, then by id: a total order.
  bool operator<(const RankedId& other) const {
    return key < other.key || (key == other.key && id < other.id);
  }
  bool operator==(const RankedId&) const = default;
};

/// Candidates that break the rules of one plan field.
struct InvalidCount {
  std::int64_t count = 0;
  std::int64_t first_id = -1;  ///< the lowest such candidate id
  std::string example;         ///< the rule's message for first_id
  bool operator==(const InvalidCount&) const = default;
};

/// What the fast tier found over a set of shapes. Merging is exact and order-independent.
struct SearchTally {
  std::int64_t shapes = 0;         ///< shapes visited that are plans
  std::int64_t enumerated = 0;     ///< candidates enumerated (plans)
  std::int64_t invalid = 0;        ///< of which break a plan rule
  std::int64_t out_of_memory = 0;  ///< valid, but need more than the GPU's memory
  std::int64_t fitting = 0;        ///< valid and fitting: ranked by the fast tier
  /// Invalid candidates by the plan field whose rule they break ("gbs", "tp", ...).
  std::map<std::string, InvalidCount> invalid_by_field;
  /// The smallest peak memory per GPU of a valid plan, bytes (for "nothing fits").
  double min_peak_bytes = std::numeric_limits<double>::infinity();
  std::vector<RankedId> best;    ///< fitting candidates by (fast step time, id), at most keep_best
  std::vector<RankedId> sample;  ///< fitting candidates by (sampling hash, id), at most keep_sample
  std::int64_t keep_best = 0;
  std::int64_t keep_sample = 0;

  /// Adds `other` (a tally of other shapes of the same space) into this one.
  void merge(const SearchTally& other);
  bool operator==(const SearchTally&) const = default;
};

/// Which shapes a process visits: those with index % count == index.
struct SearchShard {
  int index = 0;
  int count = 1;
};

/// How to search.
struct SearchOptions {
  int top = 10;              ///< plans the answer lists
  int exact = 0;             ///< candidates re-simulated; 0: max(4 x top, 32)
  int sample = 0;            ///< fitting plans sampled for the fast tier's rank agreement (0: none)
  int threads = 1;           ///< worker threads of each tier
  SimulateOptions simulate;  ///< how both tiers time a plan (network, kernels, overrides)
  /// Called from the calling thread about five times a second while a tier runs, with the
  /// tier's name ("fast", "exact"), the work done and the work in all.
  std::function<void(const char* tier, std::int64_t done, std::int64_t total)> progress;
  /// The most candidates the exact tier re-simulates down the fast ranking while its winner
  /// is not yet stable (0: EXACT_CAP_FACTOR x exact_count()).
  int exact_cap = 0;
  /// The number of candidates the exact tier re-simulates first.
  int exact_count() const { return exact > 0 ? exact : std::max(4 * top, 32); }
  /// The fast tier's best candidates kept for the exact tier: its cap (at least exact_count(),
  /// at most MAX_EXACT_CAP).
  int keep_count() const;
  /// The exact tier's window and batch: the winner is stable once this many re-simulated
  /// candidates after it, in the fast ranking, did not beat it; max(8, exact_count() / 2).
  int stable_window() const { return std::max(8, exact_count() / 2); }
};

/// The exact tier's default cap, a multiple of exact_count(), and its absolute limit (the most
/// candidates a tally keeps, search_tally_json.cpp's MAX_KEEP); docs/limits.md.
inline constexpr int EXACT_CAP_FACTOR = 8;
inline constexpr int MAX_EXACT_CAP = 1 << 20;

/// One re-simulated candidate.
struct SimulatedCandidate {
  std::int64_t id = 0;
  models::TrainingPlan plan;
  double fast_step_s = 0;  ///< the fast tier's estimate, seconds
  int fast_rank = 0;       ///< its 1-based position in the fast tier's ranking
  StepReport report;       ///< the step simulator's answer
};

/// The search's answer.
struct SearchResult {
  SearchTally tally;
  /// The re-simulated candidates by (simulated step time, peak memory, id): the final
  /// ranking.
  std::vector<SimulatedCandidate> ranked;
  /// The sample's (fast estimate, simulated step time), in seconds, by sampling order.
  std::vector<std::pair<double, double>> sample_times;
  /// Spearman's rho of fast vs simulated step times over the re-simulated candidates and
  /// over the sample (NaN when fewer than two).
  double rho_resimulated = std::numeric_limits<double>::quiet_NaN();
  double rho_sample = std::numeric_limits<double>::quiet_NaN();
  /// Candidates of the fast ranking re-simulated (its first `resimulated`): at least
  /// exact_count(), more while the winner was not stable, at most the cap.
  std::int64_t resimulated = 0;
  /// The exact tier stopped because its winner was stable: no later candidate among the last
  /// stable_window() re-simulated beat it, and the next candidate's fast estimate, divided by
  /// 1 + stable_margin, is slower than the winner's simulated time (or every fitting plan was
  /// re-simulated). False: it stopped at the cap.
  bool winner_stable = false;
  /// The fast tier's largest relative overestimate seen on the re-simulated candidates,
  /// max(fast / simulated) - 1 (negative when it underestimated them all): a candidate is
  /// taken to be no faster than its estimate / (1 + stable_margin).
  double stable_margin = 0;
  /// Candidates the step simulator could not run (left out of the ranking), the lowest id
  /// of them and its error.
  std::int64_t failed = 0;
  std::int64_t first_failed_id = -1;
  std::string first_failure;
};

/// The fast tier over `shard` of `space` with options.threads threads. `model` and `cluster`
/// as the space was built for. Never throws for an invalid candidate (it is counted).
SearchTally fast_tier(const models::ModelSpec& model, const SearchSpace& space,
                      const topo::Cluster& cluster, const SearchOptions& options,
                      SearchShard shard = {});

/// Checks that a whole-space tally has something to rank. Throws ValidationError when no
/// candidate is valid (the most frequent rule's message), InfeasibleError when none fits.
void check_tally(const SearchTally& tally, const SearchSpace& space, double capacity_bytes);

/// The exact tier: re-simulates the tally's best exact_count() candidates, then further down the
/// fast ranking in batches of stable_window() until the winner is stable (SearchResult::
/// winner_stable) or keep_count() were re-simulated; then its sample. The batches and the stop
/// depend on the simulated times alone: the same answer for any thread count.
SearchResult exact_tier(const models::ModelSpec& model, const SearchSpace& space,
                        const topo::Cluster& cluster, SearchTally tally,
                        const SearchOptions& options);

/// The answer from a tally of the whole space (one fast tier's, or the merged tallies of its
/// shards): check_tally, then exact_tier. Throws what check_tally throws, and InternalError
/// when the step simulator could run none of the best candidates.
SearchResult finish_search(const models::ModelSpec& model, const SearchSpace& space,
                           const topo::Cluster& cluster, SearchTally tally,
                           const SearchOptions& options);

/// Both tiers over the whole space: fast_tier, then finish_search.
SearchResult run_search(const models::ModelSpec& model, const SearchSpace& space,
                        const topo::Cluster& cluster, const SearchOptions& options);

/// Spearman's rank correlation of `a` and `b` (same length; ties get their average rank);
/// NaN for fewer than two pairs or a constant side.
double spearman(const std::vector<double>& a, const std::vector<double>& b);

/// The largest difference between two step reports' breakdowns (compute, pipeline bubble,
/// exposed tp/cp/ep/dp communication, optimizer): its name and both values, seconds.
struct BreakdownDifference {
  std::string part;
  double first_s = 0;
  double second_s = 0;
};
/// Where `runner_up` loses most to `winner`.
BreakdownDifference largest_difference(const StepReport& winner, const StepReport& runner_up);

/// Checks a tally that `source` (a file) says is `shard`'s of `space`, before it is merged:
/// its candidates are of that shard, in order, its sample keys their sampling hashes and its
/// best keys the fast tier's estimates, computed again. Throws ConfigError naming the file and
/// the row of a forged or damaged tally.
void verify_tally(const models::ModelSpec& model, const SearchSpace& space,
                  const topo::Cluster& cluster, const SearchOptions& options,
                  const SearchTally& tally, SearchShard shard, const std::string& source);

/// The JSON text of a tally (for partial results) with the space's fingerprint, and back.
/// tally_from_json throws ConfigError on malformed text, a tally of another space, or a count,
/// id or key outside what the space holds (every count at most its candidates).
std::string tally_to_json(const SearchTally& tally, const SearchSpace& space);
SearchTally tally_from_json(const std::string& text, const std::string& source,
                            const SearchSpace& space);

}  // namespace loom::strategies
