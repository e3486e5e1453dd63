// Lowering a request with a fixed algorithm and protocol: dispatch to the algorithm's
// lowering, NCCL's costs, identical concurrent groups folded into every pattern.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/error.hpp"
#include "sim/collective_lowering.hpp"
#include "sim/network.hpp"

namespace loom::sim {

using Op = CollectiveOp;

int default_chunks(double bytes, int cap) {
  double k = std::ceil(bytes / (4.0 * 1024 * 1024));
  return static_cast<int>(std::clamp(k, 1.0, static_cast<double>(cap)));
}

namespace {

// Appends the group's patterns and phases for algorithm `a` (the group can run it).
void lower_group(ScheduleBuilder& b, const CollectiveRequest& req, Op op, double S, Algorithm a,
                 Protocol protocol, bool classes) {
  switch (a) {
    case Algorithm::RING:
      lower_ring(b, op, S, req);
      break;
    case Algorithm::TREE:
      lower_tree(b, S, req.pipeline_chunks ? req.pipeline_chunks : tree_chunks(b, S, protocol));
      break;
    case Algorithm::DIRECT:
      lower_direct(b, op, S, req.root, classes);
      break;
    case Algorithm::MASTER_WORKER:
      lower_master_worker(b, op, S, req.root);
      break;
    case Algorithm::HALVING_DOUBLING:
      lower_halving_doubling(b, op, S, req.root);
      break;
    case Algorithm::HIERARCHICAL:
      lower_hierarchical(b, S);
      break;
    case Algorithm::NVLS:
      lower_nvls(b, S);
      break;
    case Algorithm::NVLS_TREE:
      lower_nvls_tree(b, S);
      break;
    case Algorithm::AUTO:
      throw InternalError("build_schedule called with auto");
  }
}

// One group's schedule with its costs (the group can run `a`; see why_cannot_run).
// `by_class`: a symmetric all-to-all may be lowered by flow class (not when concurrent groups'
// flows are added to its patterns: their sum is not symmetric in general).
CollectiveSchedule build_one(Fabric& fabric, const CollectiveRequest& req, Algorithm a,
                             Protocol protocol, const CostOptions& options, bool by_class) {
  ScheduleBuilder b(fabric, req.ranks);
  Op op = req.op;
  double S = req.bytes;
  if (op == Op::BARRIER) {  // a barrier is an all-reduce of nothing: latency only
    op = a == Algorithm::DIRECT ? Op::ALL_TO_ALL : Op::ALL_REDUCE;
    S = 0;
  }
  if (b.n() > 1) lower_group(b, req, op, S, a, protocol, by_class);
  const std::vector<int> classes = b.phase_classes();
  CollectiveSchedule s = b.finish();
  s.algorithm = a;
  s.protocol = protocol;
  if (!options.nccl_overheads) {
    for (auto& ph : s.phases) ph.overhead = 0;
    s.wire_factor = req.contention;
    return s;
  }
  apply_nccl_costs(fabric, req, op, S, classes, s);
  return s;
}

}  // namespace

std::optional<CollectiveSchedule> lower_with_twins(Fabric& fabric, const CollectiveRequest& req,
                                                   Algorithm a, Protocol protocol,
                                                   const CostOptions& options) {
  const bool alone = req.concurrent_groups.empty();
  CollectiveSchedule s =
      build_one(fabric, req, a, protocol, options, alone && options.flow_classes);
  if (alone) return s;
  if (options.twins_once && twins_fold_away(fabric, req, a, s)) {
    s.twins_left_out = true;
    return s;
  }
  // Add the identical groups' flows to every pattern, pattern by pattern.
  std::vector<CollectiveSchedule> others;
  for (const auto& g : req.concurrent_groups) {
    CollectiveRequest other = req;
    other.ranks = g;
    other.concurrent_groups.clear();
    others.push_back(build_one(fabric, other, a, protocol, options, false));
    if (others.back().num_patterns() != s.num_patterns() ||
        others.back().phases.size() != s.phases.size()) {
      return std::nullopt;
    }
  }
  std::vector<FlowSpec> flows;
  std::vector<std::uint32_t> begin;
  auto append = [&](const CollectiveSchedule& from, int p) {
    flows.insert(flows.end(), from.flows.begin() + from.pattern_begin[p],
                 from.flows.begin() + from.pattern_begin[p + 1]);
  };
  for (int p = 0; p < s.num_patterns(); ++p) {
    begin.push_back(static_cast<std::uint32_t>(flows.size()));
    append(s, p);
    for (const auto& o : others) append(o, p);
  }
  begin.push_back(static_cast<std::uint32_t>(flows.size()));
  s.flows = std::move(flows);
  s.pattern_begin = std::move(begin);
  return s;
}

CollectiveSchedule build_schedule(Fabric& fabric, const CollectiveRequest& req, Algorithm a,
                                  Protocol protocol, const CostOptions& options,
                                  const FieldNames& names) {
  validate_request(fabric.cluster(), req);
  if (auto why = why_cannot_run(fabric, req, a, protocol)) {
    const std::string field = names("algorithm");
    throw ValidationError(field, fmt::format("{}: {}", field, *why));
  }
  auto s = lower_with_twins(fabric, req, a, protocol, options);
  if (!s) {
    throw ValidationError("concurrent_groups",
                          "a concurrent group lowers to a different schedule (different "
                          "node layout); only identical groups can be folded together");
  }
  return std::move(*s);
}

SimTime estimate_schedule(Fabric& fabric, const CollectiveSchedule& s) {
  std::vector<SimTime> memo(static_cast<size_t>(s.num_patterns()), -1);
  SimTime total = s.base_latency;
  for (const auto& ph : s.phases) {
    auto& t = memo[static_cast<size_t>(ph.pattern)];
    if (t < 0) t = analytical_batch_time(fabric, s.batch(ph.pattern));
    total += t + ph.overhead;
  }
  return total;
}

}  // namespace loom::sim
