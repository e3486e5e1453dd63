// The collective tuner: resolves `auto` (and the protocol) as NCCL's tuner does, by the
// least predicted time among the algorithms that can run the request; an explicit
// algorithm gets its best protocol. Algorithms that cannot run are skipped by asking
// why_cannot_run, not by catching errors.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <tuple>

#include "common/error.hpp"
#include "sim/collective_lowering.hpp"
#include "sim/nccl_model.hpp"

namespace loom::sim {

using Op = CollectiveOp;

namespace {

// An (algorithm, protocol) pair with NCCL's predicted time, microseconds; ties go to the
// earlier `order` (NCCL's loop order).
using Candidate = std::tuple<double, int, Algorithm, Protocol>;

class Tuner {
 public:
  Tuner(Fabric& fabric, const CollectiveRequest& req, const CostOptions& options,
        const FieldNames& names)
      : fabric_(fabric), req_(req), options_(options), names_(names) {
    if (options.nccl_overheads) protocols_ = {Protocol::LL, Protocol::LL128, Protocol::SIMPLE};
  }

  // NCCL's tuner: every (algorithm, protocol) its model covers, by predicted time; ties go
  // to the first in NCCL's loop order (Tree, Ring, NVLS, NVLSTree; LL, LL128, Simple). NVLSTree
  // is measured only where it can run (its bandwidths need the group's split). Empty without
  // NCCL's overheads or for a single rank.
  std::vector<Candidate> ranked(const std::vector<Algorithm>& algorithms) const {
    std::vector<Candidate> by_time;
    if (!options_.nccl_overheads || req_.ranks.size() < 2) return by_time;
    NcclShape shape = nccl_shape(fabric_, req_.ranks);
    // NCCL chooses by its own constants: a calibrated fabric's latency scales and NVLS
    // efficiency time the chosen schedule (its lowering), never the choice itself.
    shape.tuning = NcclTuning{};
    if (shape.nodes > 1 &&
        std::find(algorithms.begin(), algorithms.end(), Algorithm::NVLS_TREE) != algorithms.end() &&
        implements(Algorithm::NVLS_TREE, req_.op) &&
        !why_cannot_run(fabric_, req_, Algorithm::NVLS_TREE, Protocol::SIMPLE)) {
      nccl_split_bus_bandwidth(fabric_, req_.ranks, shape);
    }
    const double bytes = req_.op == Op::BARRIER ? 0.0 : req_.bytes;
    int order = 0;
    for (Algorithm a : algorithms) {
      if (!implements(a, req_.op)) continue;
      for (Protocol p : protocols_) {
        double t = nccl_time_us(a, p, req_.op, shape, bytes);
        if (t >= 0) by_time.emplace_back(t, order++, a, p);
      }
    }
    std::sort(by_time.begin(), by_time.end());
    return by_time;
  }

  // The first candidate this group can run (e.g. NVLS needs an NVLS switch next to every
  // rank), lowered.
  std::optional<CollectiveSchedule> first_runnable(const std::vector<Candidate>& candidates) {
    for (const auto& [t, order, a, p] : candidates) {
      if (why_cannot_run(fabric_, req_, a, p)) continue;
      if (auto s = lower_with_twins(fabric_, req_, a, p, options_)) return s;
    }
    return std::nullopt;
  }

  // For algorithms NCCL does not model: the protocol with the least analytical time, with
  // that time; nullopt when the algorithm cannot run on this group.
  std::optional<std::pair<SimTime, CollectiveSchedule>> best_protocol(Algorithm a) {
    std::optional<std::pair<SimTime, CollectiveSchedule>> best;
    for (Protocol p : protocols_) {
      if (why_cannot_run(fabric_, req_, a, p)) continue;
      auto s = lower_with_twins(fabric_, req_, a, p, options_);
      if (!s) return std::nullopt;
      SimTime t = estimate_schedule(fabric_, *s);
      if (!best || t < best->first) best.emplace(t, std::move(*s));
    }
    return best;
  }

  // An explicit algorithm: NCCL's best protocol for it, else the least analytical time.
  // Throws ValidationError (build_schedule) when it cannot run.
  CollectiveSchedule fixed(Algorithm a) {
    const auto candidates = ranked({a});
    if (!candidates.empty()) {
      const auto& [t, order, algorithm, p] = candidates.front();
      return build_schedule(fabric_, req_, algorithm, p, options_, names_);
    }
    CollectiveSchedule best;
    SimTime best_time = std::numeric_limits<SimTime>::max();
    for (Protocol p : protocols_) {
      if ((a == Algorithm::NVLS || a == Algorithm::NVLS_TREE) && p != Protocol::SIMPLE) continue;
      CollectiveSchedule s = build_schedule(fabric_, req_, a, p, options_, names_);
      SimTime t = estimate_schedule(fabric_, s);
      if (t < best_time) best_time = t, best = std::move(s);
    }
    return best;
  }

  // `auto`: NCCL's choice among tree, ring, NVLS and NVLSTree; without NCCL's model (overheads off,
  // or an op it does not cover) the least analytical time among those that implement the
  // op (direct for point-to-point ops).
  CollectiveSchedule automatic() {
    if (auto s = first_runnable(
            ranked({Algorithm::TREE, Algorithm::RING, Algorithm::NVLS, Algorithm::NVLS_TREE})))
      return std::move(*s);
    std::vector<Algorithm> candidates;
    for (Algorithm a : {Algorithm::RING, Algorithm::TREE, Algorithm::NVLS, Algorithm::NVLS_TREE})
      if (implements(a, req_.op)) candidates.push_back(a);
    if (candidates.empty()) candidates.push_back(Algorithm::DIRECT);
    SimTime best_time = std::numeric_limits<SimTime>::max();
    CollectiveSchedule best;
    for (Algorithm a : candidates) {
      auto found = best_protocol(a);
      if (found && found->first < best_time)
        best_time = found->first, best = std::move(found->second);
    }
    if (best_time == std::numeric_limits<SimTime>::max()) {
      const std::string field = names_("algorithm");
      throw ValidationError(
          field, fmt::format("{}: no algorithm can run {} on this group; try {} direct", field,
                             to_string(req_.op), field));
    }
    return best;
  }

 private:
  Fabric& fabric_;
  const CollectiveRequest& req_;
  const CostOptions& options_;
  const FieldNames& names_;
  std::vector<Protocol> protocols_ = {Protocol::SIMPLE};
};

}  // namespace

CollectiveSchedule plan_collective(Fabric& fabric, const CollectiveRequest& req,
                                   const CostOptions& options, const FieldNames& names) {
  validate_request(fabric.cluster(), req);
  Tuner tuner(fabric, req, options, names);
  return req.algorithm == Algorithm::AUTO ? tuner.automatic() : tuner.fixed(req.algorithm);
}

}  // namespace loom::sim
