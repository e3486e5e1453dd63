#include "strategies/search/search.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <thread>
#include <tuple>
#include <type_traits>

#include "common/error.hpp"
#include "common/seeded_draw.hpp"
#include "common/units.hpp"
#include "strategies/plan/plan_resolve.hpp"
#include "strategies/plan/plan_rules.hpp"
#include "strategies/search/fast_estimate.hpp"
#include "strategies/search/fast_model.hpp"

namespace loom::strategies {
namespace {

// Shapes a worker takes at once: small enough to balance two threads over a few thousand
// shapes, large enough that the shared counter is not contended.
constexpr std::int64_t SHAPE_BLOCK = 8;

// splitmix64 as a fixed, seedless hash that spreads the ids, so that the sample is a
// deterministic pseudo-random draw of the fitting plans.
double sample_key(std::int64_t id) {
  return static_cast<double>(splitmix64(static_cast<std::uint64_t>(id)) >> 11);  // exact in 53 bits
}

// Keeps the `keep` smallest of `list` (sorted), dropping the rest.
void trim(std::vector<RankedId>& list, std::int64_t keep) {
  const auto n = static_cast<size_t>(std::max<std::int64_t>(0, keep));
  if (list.size() > n) {
    std::nth_element(list.begin(), list.begin() + static_cast<std::ptrdiff_t>(n), list.end());
    list.resize(n);
  }
  std::sort(list.begin(), list.end());
}

// Adds `item`, trimming only now and then (amortised).
void push_bounded(std::vector<RankedId>& list, RankedId item, std::int64_t keep) {
  if (keep <= 0) return;
  list.push_back(item);
  if (static_cast<std::int64_t>(list.size()) >= 2 * keep + 64) trim(list, keep);
}

// Counts `count` candidates invalid under `field`; `message` (a string, or a callable that
// makes one: formatted only for the example kept, the lowest id) explains the first.
template <typename Message>
void add_invalid(SearchTally& t, const std::string& field, std::int64_t count, std::int64_t id,
                 Message&& message) {
  InvalidCount& c = t.invalid_by_field[field];
  c.count += count;
  if (c.first_id < 0 || id < c.first_id) {
    c.first_id = id;
    if constexpr (std::is_invocable_v<Message>)
      c.example = message();
    else
      c.example = message;
  }
}

// One worker's view of the fast tier: its estimator and its tally.
class FastWorker {
 public:
  FastWorker(const models::ModelSpec& model, const SearchSpace& space, const topo::Cluster& cluster,
             const SearchOptions& options, std::shared_ptr<SharedCollectiveTimes> times,
             SearchTally& tally)
      : space_(space),
        estimator_(model, cluster, options.simulate, std::move(times)),
        capacity_(cluster.gpu.hbm_bytes),
        t_(tally) {}

  void visit(std::int64_t index) {
    const auto shape = space_.shape(index);
    if (!shape) return;
    ++t_.shapes;
    const auto [tp, dp] = space_.tp_dp(*shape);
    const std::int64_t n = switch_count(tp, dp);
    const std::int64_t base = index * space_.switch_combinations();
    t_.enumerated += n;
    models::TrainingPlan plan;
    try {
      plan = space_.resolve(*shape);
    } catch (const PlanError& e) {
      t_.invalid += n;
      add_invalid(t_, e.key(), n, base + first_switch(tp, dp), e.what());
      return;
    } catch (const ValidationError& e) {
      t_.invalid += n;
      add_invalid(t_, e.field(), n, base + first_switch(tp, dp), e.what());
      return;
    }
    // Memory depends on the ZeRO stage and recompute policy, not on the overlaps.
    std::map<std::pair<int, int>, double> peaks;
    models::TrainingPlan q;  // assigned, not copied anew, per switch combination
    for (std::int64_t j = 0; j < space_.switch_combinations(); ++j) {
      const auto w = space_.switches(j, plan.tp, plan.dp);
      if (!w) continue;
      q = plan;
      SearchSpace::apply(*w, q);
      const std::int64_t id = base + j;
      if (const auto why = SearchSpace::switch_blocked(*w, q)) {  // Megatron's rules void it
        ++t_.invalid;
        add_invalid(t_, "overlap_moe_expert_parallel_comm", 1, id, *why);
        continue;
      }
      if (const auto rule = broken_framework_rule(q)) {
        ++t_.invalid;  // the framework asserts against this combination of switches
        add_invalid(t_, field_of(*rule), 1, id,
                    [&] { return refusal_of(*rule, q, PlanSources::command_line()).message; });
        continue;
      }
      const auto key = std::make_pair(q.zero, static_cast<int>(q.recompute));
      try {
        auto it = peaks.find(key);
        if (it == peaks.end()) it = peaks.emplace(key, estimator_.peak_memory_bytes(q)).first;
        t_.min_peak_bytes = std::min(t_.min_peak_bytes, it->second);
        if (it->second > capacity_) {
          ++t_.out_of_memory;
          continue;
        }
        const double step = estimator_.step_time_s(q);
        ++t_.fitting;
        push_bounded(t_.best, {step, id}, t_.keep_best);
        push_bounded(t_.sample, {sample_key(id), id}, t_.keep_sample);
      } catch (const ValidationError& e) {
        // A rule the plan rules do not state (a schedule shape, a layout): counted, not fatal.
        ++t_.invalid;
        add_invalid(t_, e.field(), 1, id, e.what());
      }
    }
  }

 private:
  std::int64_t switch_count(int tp, int dp) {
    const auto key = std::make_pair(tp, dp);
    auto it = counts_.find(key);
    if (it == counts_.end()) it = counts_.emplace(key, space_.switch_count(tp, dp)).first;
    return it->second;
  }
  std::int64_t first_switch(int tp, int dp) const {
    for (std::int64_t j = 0; j < space_.switch_combinations(); ++j)
      if (space_.switches(j, tp, dp)) return j;
    return 0;
  }

  const SearchSpace& space_;
  FastEstimator estimator_;
  double capacity_;
  SearchTally& t_;
  std::map<std::pair<int, int>, std::int64_t> counts_;
};

// Runs `work(worker, item)` for items 0..total-1 on `threads` threads, each with its own
// state made by `make(worker)`, reporting progress from the calling thread.
template <typename Make, typename Work>
void parallel_for(std::int64_t total, std::int64_t block, int threads, const char* tier,
                  const SearchOptions& options, Make make, Work work) {
  std::atomic<std::int64_t> next{0}, done{0};
  std::atomic<int> running{0};
  std::mutex error_mutex;
  std::exception_ptr error;
  const int n = std::max(1, threads);
  std::vector<std::thread> pool;
  running = n;
  for (int w = 0; w < n; ++w) {
    pool.emplace_back([&, w] {
      try {
        auto state = make(w);
        for (std::int64_t start; (start = next.fetch_add(block)) < total;) {
          const std::int64_t end = std::min(total, start + block);
          for (std::int64_t i = start; i < end; ++i) work(state, i);
          done += end - start;
        }
      } catch (...) {
        const std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        next = total;  // the others stop too
      }
      --running;
    });
  }
  while (options.progress && running > 0) {
    options.progress(tier, done.load(), total);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  for (auto& t : pool) t.join();
  if (options.progress) options.progress(tier, done.load(), total);
  if (error) std::rethrow_exception(error);
}

std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  for (size_t i = 0; i < v.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    const double avg = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;
    for (size_t k = i; k <= j; ++k) r[order[k]] = avg;
    i = j + 1;
  }
  return r;
}

}  // namespace

void SearchTally::merge(const SearchTally& o) {
  shapes += o.shapes;
  enumerated += o.enumerated;
  invalid += o.invalid;
  out_of_memory += o.out_of_memory;
  fitting += o.fitting;
  for (const auto& [field, c] : o.invalid_by_field)
    add_invalid(*this, field, c.count, c.first_id, c.example);
  min_peak_bytes = std::min(min_peak_bytes, o.min_peak_bytes);
  keep_best = std::max(keep_best, o.keep_best);
  keep_sample = std::max(keep_sample, o.keep_sample);
  best.insert(best.end(), o.best.begin(), o.best.end());
  sample.insert(sample.end(), o.sample.begin(), o.sample.end());
  trim(best, keep_best);
  trim(sample, keep_sample);
}

void verify_tally(const models::ModelSpec& model, const SearchSpace& space,
                  const topo::Cluster& cluster, const SearchOptions& options,
                  const SearchTally& tally, SearchShard shard, const std::string& source) {
  const auto forged = [&](const char* list, size_t i, const RankedId& r, const std::string& why) {
    throw ConfigError(source, fmt::format("/{}/{}", list, i),
                      fmt::format("{}: /{}/{}: [{}, {}] {}; the file is damaged or was edited: "
                                  "run that shard (--shard {}/{}) again",
                                  source, list, i, r.key, r.id, why, shard.index, shard.count));
  };
  const auto check_ids = [&](const char* list, const std::vector<RankedId>& ranked) {
    for (size_t i = 0; i < ranked.size(); ++i) {
      const std::int64_t shape =
          ranked[i].id / std::max<std::int64_t>(1, space.switch_combinations());
      if (shape % shard.count != shard.index) forged(list, i, ranked[i], "is not of this shard");
      if (i > 0 && !(ranked[i - 1] < ranked[i]))
        forged(list, i, ranked[i], "is out of order or repeated");
    }
  };
  check_ids("best", tally.best);
  check_ids("sample", tally.sample);
  for (size_t i = 0; i < tally.sample.size(); ++i)
    if (tally.sample[i].key != sample_key(tally.sample[i].id))
      forged("sample", i, tally.sample[i], "is not the candidate's sampling hash");
  // The ranking keys are printed as the fast tier's estimates: computed again, not believed.
  FastEstimator estimator(model, cluster, options.simulate);
  for (size_t i = 0; i < tally.best.size(); ++i) {
    const RankedId& r = tally.best[i];
    double step = -1;
    try {
      step = estimator.step_time_s(space.candidate(r.id));
    } catch (const Error&) {
      forged("best", i, r, "is not a valid candidate");
    }
    if (std::fabs(step - r.key) > 1e-9 * std::max(step, r.key))
      forged("best", i, r, fmt::format("is not the fast tier's estimate ({} s)", step));
  }
}

SearchTally fast_tier(const models::ModelSpec& model, const SearchSpace& space,
                      const topo::Cluster& cluster, const SearchOptions& options,
                      SearchShard shard) {
  // The precision fields are the same in every plan: a GPU that cannot run them is the
  // user's error, reported once, not a failure of every candidate.
  check_precision_input_on_cluster(space.input(), cluster);
  check_graph_scope_input(space.input(), model);     // likewise the CUDA-graph scope
  check_context_window_input(space.input(), model);  // and a fixed cp over a sliding window
  if (shard.count < 1 || shard.index < 0 || shard.index >= shard.count)
    throw ValidationError("shard", fmt::format("{}/{} is not a shard; give K/N with 0 <= K < N",
                                               shard.index, shard.count));
  cluster.finalize();  // its routing index is built lazily: build it before the threads share it
  SearchTally whole;
  whole.keep_best = options.keep_count();
  whole.keep_sample = std::max(0, options.sample);
  // The shard's shapes: index, index + count, ...
  const std::int64_t total = space.shapes() > shard.index
                                 ? (space.shapes() - shard.index + shard.count - 1) / shard.count
                                 : 0;
  std::mutex merge_mutex;
  const auto times = std::make_shared<SharedCollectiveTimes>();  // shared by the threads
  struct State {
    SearchTally tally;
    std::unique_ptr<FastWorker> worker;
    std::mutex* mutex;
    SearchTally* into;
    ~State() {
      const std::lock_guard<std::mutex> lock(*mutex);
      into->merge(tally);
    }
  };
  parallel_for(
      total, SHAPE_BLOCK, options.threads, "fast", options,
      [&](int) {
        auto s = std::make_unique<State>();
        s->tally.keep_best = whole.keep_best;
        s->tally.keep_sample = whole.keep_sample;
        s->mutex = &merge_mutex;
        s->into = &whole;
        s->worker = std::make_unique<FastWorker>(model, space, cluster, options, times, s->tally);
        return s;
      },
      [&](std::unique_ptr<State>& s, std::int64_t i) {
        s->worker->visit(shard.index + i * shard.count);
      });
  trim(whole.best, whole.keep_best);
  trim(whole.sample, whole.keep_sample);
  return whole;
}

void check_tally(const SearchTally& t, const SearchSpace& space, double capacity) {
  const PlanSources& s = space.sources();
  if (t.enumerated == 0) {
    throw ValidationError(
        s.where("tp"),
        fmt::format("no {} x {} x {} among the candidates {} the cluster's {} GPUs; change the "
                    "fixed sizes or the cluster",
                    s.name("tp"), s.name("pp"), s.name("cp"),
                    space.dp_fixed() ? fmt::format("gives the fixed {} on", s.name("dp"))
                                     : std::string("divides"),
                    space.gpus()));
  }
  if (t.invalid == t.enumerated) {
    const InvalidCount* most = nullptr;
    for (const auto& [field, c] : t.invalid_by_field)
      if (!most || c.count > most->count) most = &c;
    throw ValidationError(s.where("tp"),
                          fmt::format("none of the {} candidate plans is valid; the most common "
                                      "reason: {}",
                                      t.enumerated, most ? most->example : "?"));
  }
  if (t.fitting == 0) {
    throw InfeasibleError(
        fmt::format("none of the {} valid plans fits in {:.1f} GiB per GPU; the smallest needs "
                    "{:.1f} GiB; use more GPUs, a larger GPU, or a shorter sequence",
                    t.enumerated - t.invalid, capacity / GiB, t.min_peak_bytes / GiB));
  }
}

namespace {

// Simulates space.candidate(ids[i]) into sims[i] on the options' threads; errors[i] keeps the
// step simulator's refusal of a valid plan (a loom limitation: reported, not ranked).
void simulate_all(const models::ModelSpec& model, const SearchSpace& space,
                  const topo::Cluster& cluster, const SearchOptions& options,
                  const std::vector<std::int64_t>& ids, std::vector<SimulatedCandidate>& sims,
                  std::vector<std::string>& errors) {
  const size_t from = sims.size();
  sims.resize(from + ids.size());
  errors.resize(from + ids.size());
  parallel_for(
      static_cast<std::int64_t>(ids.size()), 1, options.threads, "exact", options,
      [&](int) { return 0; },
      [&](int, std::int64_t i) {
        const size_t k = from + static_cast<size_t>(i);
        SimulatedCandidate& c = sims[k];
        c.id = ids[static_cast<size_t>(i)];
        c.plan = space.candidate(c.id);
        try {
          c.report = simulate_step(model, c.plan, cluster, options.simulate);
        } catch (const Error& e) {
          errors[k] = e.what();
        }
      });
}

// The final order: by simulated step time; equal times, the plan needing less memory first,
// then the lower id.
bool simulated_before(const SimulatedCandidate& a, const SimulatedCandidate& b) {
  return std::make_tuple(a.report.step_time_s, a.report.memory.peak_bytes, a.id) <
         std::make_tuple(b.report.step_time_s, b.report.memory.peak_bytes, b.id);
}

// Re-simulates the fast ranking's first exact_count(), then batches of stable_window() until
// the winner is stable or the cap is reached (SearchResult::winner_stable). Each decision
// depends on the simulated times of a whole batch: the same for any thread count.
void resimulate_best(const models::ModelSpec& model, const SearchSpace& space,
                     const topo::Cluster& cluster, const SearchOptions& options,
                     const SearchTally& tally, std::vector<SimulatedCandidate>& sims,
                     std::vector<std::string>& errors, SearchResult& r) {
  const size_t cap = std::min(tally.best.size(), static_cast<size_t>(options.keep_count()));
  const size_t window = static_cast<size_t>(options.stable_window());
  size_t n = 0, next = std::min(cap, static_cast<size_t>(options.exact_count()));
  size_t winner = 0;  // index of the best simulated candidate so far (when any ran)
  bool any = false;
  for (;;) {
    std::vector<std::int64_t> ids;
    for (size_t i = n; i < next; ++i) ids.push_back(tally.best[i].id);
    simulate_all(model, space, cluster, options, ids, sims, errors);
    for (size_t i = n; i < next; ++i) {
      sims[i].fast_step_s = tally.best[i].key;
      sims[i].fast_rank = static_cast<int>(i) + 1;
      if (!errors[i].empty()) continue;
      const double over = sims[i].fast_step_s / sims[i].report.step_time_s - 1;
      r.stable_margin = any ? std::max(r.stable_margin, over) : over;
      if (!any || simulated_before(sims[i], sims[winner])) winner = i;
      any = true;
    }
    n = next;
    const bool exhausted = n == tally.best.size() && static_cast<std::int64_t>(n) >= tally.fitting;
    // Every later candidate's estimate is at least the next one's (the ranking's order).
    const double next_fast = n < tally.best.size() ? tally.best[n].key
                             : tally.best.empty()  ? std::numeric_limits<double>::infinity()
                                                   : tally.best.back().key;
    r.winner_stable =
        exhausted || (any && n - (winner + 1) >= window &&
                      next_fast / (1 + r.stable_margin) > sims[winner].report.step_time_s);
    if (r.winner_stable || n >= cap) break;
    next = std::min(cap, n + window);
  }
  r.resimulated = static_cast<std::int64_t>(n);
}

}  // namespace

int SearchOptions::keep_count() const {
  const int first = exact_count();
  const int cap = exact_cap > 0 ? exact_cap
                                : static_cast<int>(std::min<std::int64_t>(
                                      std::int64_t{EXACT_CAP_FACTOR} * first, MAX_EXACT_CAP));
  return std::min(MAX_EXACT_CAP, std::max(first, cap));
}

SearchResult exact_tier(const models::ModelSpec& model, const SearchSpace& space,
                        const topo::Cluster& cluster, SearchTally tally,
                        const SearchOptions& options) {
  cluster.finalize();
  SearchResult r;
  std::vector<SimulatedCandidate> sims;  // the fast ranking's first r.resimulated, then the
  std::vector<std::string> errors;       // sample's others
  resimulate_best(model, space, cluster, options, tally, sims, errors, r);
  const size_t n_best = static_cast<size_t>(r.resimulated);
  const size_t n_sample = std::min(tally.sample.size(), static_cast<size_t>(options.sample));
  std::map<std::int64_t, size_t> slot;
  for (size_t i = 0; i < n_best; ++i) slot.emplace(tally.best[i].id, i);
  std::vector<std::int64_t> others;
  for (size_t i = 0; i < n_sample; ++i)
    if (slot.emplace(tally.sample[i].id, n_best + others.size()).second)
      others.push_back(tally.sample[i].id);
  simulate_all(model, space, cluster, options, others, sims, errors);
  for (size_t i = 0; i < sims.size(); ++i) {
    if (errors[i].empty()) continue;
    if (r.failed == 0 || sims[i].id < r.first_failed_id) {
      r.first_failed_id = sims[i].id;
      r.first_failure = errors[i];
    }
    ++r.failed;
  }
  // The fast tier's estimate of the sample's others, computed again.
  FastEstimator estimator(model, cluster, options.simulate);
  for (size_t i = n_best; i < sims.size(); ++i)
    sims[i].fast_step_s = estimator.step_time_s(sims[i].plan);
  std::vector<double> fast, exact;
  for (size_t i = 0; i < n_best; ++i) {
    if (!errors[i].empty()) continue;
    fast.push_back(sims[i].fast_step_s);
    exact.push_back(sims[i].report.step_time_s);
  }
  r.rho_resimulated = spearman(fast, exact);
  fast.clear();
  exact.clear();
  for (size_t i = 0; i < n_sample; ++i) {
    const size_t k = slot.at(tally.sample[i].id);
    if (!errors[k].empty()) continue;
    const SimulatedCandidate& c = sims[k];
    r.sample_times.emplace_back(c.fast_step_s, c.report.step_time_s);
    fast.push_back(c.fast_step_s);
    exact.push_back(c.report.step_time_s);
  }
  r.rho_sample = spearman(fast, exact);
  for (size_t i = 0; i < n_best; ++i)
    if (errors[i].empty()) r.ranked.push_back(std::move(sims[i]));
  std::sort(r.ranked.begin(), r.ranked.end(), simulated_before);
  r.tally = std::move(tally);
  return r;
}

SearchResult finish_search(const models::ModelSpec& model, const SearchSpace& space,
                           const topo::Cluster& cluster, SearchTally tally,
                           const SearchOptions& options) {
  check_tally(tally, space, cluster.gpu.hbm_bytes);
  SearchResult r = exact_tier(model, space, cluster, std::move(tally), options);
  if (r.ranked.empty()) {
    throw InternalError(
        fmt::format("the step simulator could not run any of the {} best plans; "
                    "the first error: {}",
                    r.failed, r.first_failure));
  }
  return r;
}

SearchResult run_search(const models::ModelSpec& model, const SearchSpace& space,
                        const topo::Cluster& cluster, const SearchOptions& options) {
  return finish_search(model, space, cluster, fast_tier(model, space, cluster, options), options);
}

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n = std::min(a.size(), b.size());
  if (n < 2) return std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> ra = ranks({a.begin(), a.begin() + static_cast<std::ptrdiff_t>(n)});
  const std::vector<double> rb = ranks({b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n)});
  // Pearson's correlation of the ranks (exact with ties).
  const double mean = (static_cast<double>(n) + 1) / 2;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < n; ++i) {
    sab += (ra[i] - mean) * (rb[i] - mean);
    saa += (ra[i] - mean) * (ra[i] - mean);
    sbb += (rb[i] - mean) * (rb[i] - mean);
  }
  if (saa == 0 || sbb == 0) return std::numeric_limits<double>::quiet_NaN();
  return sab / std::sqrt(saa * sbb);
}

BreakdownDifference largest_difference(const StepReport& a, const StepReport& b) {
  const auto parts = [](const StepReport& r) {
    std::vector<std::pair<std::string, double>> out = {
        {"compute", r.compute_time_s - r.optimizer_time_s},
        {"pipeline bubble", r.bubble_time_s},
        {"optimizer step", r.optimizer_time_s}};
    for (models::Dim d : {models::Dim::TP, models::Dim::CP, models::Dim::EP, models::Dim::DP})
      out.emplace_back(fmt::format("exposed {} communication", models::to_string(d)),
                       r.exposed_comm_s[static_cast<size_t>(models::index(d))]);
    return out;
  };
  const auto pa = parts(a), pb = parts(b);
  BreakdownDifference best{pa[0].first, pa[0].second, pb[0].second};
  for (size_t i = 1; i < pa.size(); ++i)
    if (pb[i].second - pa[i].second > best.second_s - best.first_s)
      best = {pa[i].first, pa[i].second, pb[i].second};
  return best;
}

}  // namespace loom::strategies
