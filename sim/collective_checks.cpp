// What a collective request must satisfy: the request itself (validate_request) and, per
// algorithm and protocol, the group (why_cannot_run). The tuner asks the latter to skip
// what cannot run; build_schedule turns its answer into a ValidationError.
#include <fmt/format.h>

#include <cmath>
#include <set>

#include "common/error.hpp"
#include "common/limits.hpp"
#include "common/strings.hpp"
#include "sim/collective_lowering.hpp"

namespace loom::sim {

using Op = CollectiveOp;

namespace {

// The ranks of one group: at least one (two for send_recv), in the cluster, each once.
void validate_group(const topo::Cluster& cluster, const CollectiveRequest& req,
                    const std::vector<int>& ranks) {
  const int n = static_cast<int>(ranks.size());
  if (n < 1)
    throw ValidationError("group", "a collective needs at least one rank; the group is empty");
  if (req.op == Op::SEND_RECV && n < 2) {
    throw ValidationError("group", "send_recv needs at least 2 ranks; the group has 1");
  }
  std::set<int> seen;
  for (int r : ranks) {
    cluster.gpu_vertex(r);  // throws when out of range
    if (!seen.insert(r).second) {
      throw ValidationError("group", fmt::format("rank {} appears twice in the group; list each "
                                                 "rank once",
                                                 r));
    }
  }
}

// Why the group at `ranks` cannot run `a` (nullopt: it can). One rank runs anything: its
// schedule is empty.
std::optional<std::string> group_cannot_run(Fabric& fabric, const std::vector<int>& ranks,
                                            Algorithm a) {
  if (ranks.size() < 2) return std::nullopt;
  switch (a) {
    case Algorithm::HALVING_DOUBLING:
      return halving_doubling_cannot_run(ScheduleBuilder(fabric, ranks));
    case Algorithm::HIERARCHICAL:
      return hierarchical_cannot_run(ScheduleBuilder(fabric, ranks));
    case Algorithm::NVLS:
      return nvls_cannot_run(ScheduleBuilder(fabric, ranks));
    case Algorithm::NVLS_TREE:
      return nvls_tree_cannot_run(ScheduleBuilder(fabric, ranks));
    default:
      return std::nullopt;
  }
}

}  // namespace

void validate_request(const topo::Cluster& cluster, const CollectiveRequest& req) {
  const int n = static_cast<int>(req.ranks.size());
  validate_group(cluster, req, req.ranks);
  if (req.root < 0 || req.root >= n) {
    throw ValidationError(
        "root", fmt::format("root index {} is outside the group of {} ranks", req.root, n));
  }
  if (!(req.bytes >= 0) || !std::isfinite(req.bytes)) {
    throw ValidationError("bytes",
                          fmt::format("message size {} must be finite and >= 0", req.bytes));
  }
  if (req.pipeline_chunks < 0) {
    throw ValidationError::not_positive("pipeline_chunks", std::to_string(req.pipeline_chunks));
  }
  if (!(req.contention >= 1.0)) {
    throw ValidationError(
        "contention",
        fmt::format("contention {} must be >= 1 (a bandwidth divisor)", req.contention));
  }
  for (const auto& g : req.concurrent_groups) {
    if (static_cast<int>(g.size()) != n) {
      throw ValidationError("concurrent_groups",
                            fmt::format("a concurrent group has {} ranks; identical groups must "
                                        "have {} like the simulated one",
                                        g.size(), n));
    }
  }
  for (const auto& g : req.concurrent_groups) validate_group(cluster, req, g);
}

std::optional<std::string> why_cannot_run(Fabric& fabric, const CollectiveRequest& req, Algorithm a,
                                          Protocol protocol) {
  if (!implements(a, req.op)) {
    std::vector<std::string> names;
    for (const auto& info : collective_algorithms())
      if (implements(info.id, req.op)) names.push_back(info.name);
    return fmt::format("algorithm '{}' does not implement {}; use one of: {}", to_string(a),
                       to_string(req.op), join(names, ", "));
  }
  if ((a == Algorithm::NVLS || a == Algorithm::NVLS_TREE) && protocol != Protocol::SIMPLE)
    return fmt::format("algorithm '{}' runs only with the Simple protocol", to_string(a));
  auto why = group_cannot_run(fabric, req.ranks, a);
  for (size_t g = 0; !why && g < req.concurrent_groups.size(); ++g)
    why = group_cannot_run(fabric, req.concurrent_groups[g], a);
  if (why) return fmt::format("algorithm '{}' {}", to_string(a), *why);
  return std::nullopt;
}

}  // namespace loom::sim
