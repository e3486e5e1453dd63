#include "strategies/step/task_budget.hpp"

#include <fmt/format.h>

#include <cmath>

#include "common/error.hpp"
#include "common/limits.hpp"
#include "strategies/step/step_graph.hpp"

namespace loom::strategies {

namespace {

// Tasks one part (a chunk or a unit) of a pass adds on `replicas` simulated GPUs: its compute
// tasks on each, and one collective task per group for each run of its collectives on one
// dimension (`group_size` of that dimension: the groups of the simulated GPUs are at least
// replicas / size).
template <typename GroupSize>
double part_tasks(const PassCost& c, PassKind kind, double replicas, GroupSize group_size) {
  auto runs = [&](const std::vector<CommItem>& items) {
    double tasks = 0;
    for (size_t k = 0; k < items.size(); ++k) {
      if (k > 0 && items[k].dim == items[k - 1].dim) continue;
      const int size = group_size(items[k].dim);
      if (size >= 2) tasks += std::ceil(replicas / size);
    }
    return tasks;
  };
  switch (kind) {
    case PassKind::FORWARD:
      return replicas + runs(c.fwd_comm);
    case PassKind::BACKWARD:
    case PassKind::BACKWARD_INPUT:
      return (c.recompute_s > 0 ? replicas + runs(c.recompute_comm) : 0.0) + replicas +
             runs(c.bwd_comm);
    case PassKind::BACKWARD_WEIGHT:
      return replicas;
  }
  return replicas;
}

}  // namespace

double min_step_tasks(const StepGraph& g) {
  const auto replicas = static_cast<double>(g.replicas.size());
  double tasks = 0;
  for (int s = 0; s < g.stages(); ++s) {
    const int rank = g.index.rank(g.replicas[0].t, g.replicas[0].c, g.replicas[0].d, s);
    auto group_size = [&](models::Dim dim) {
      return static_cast<int>(g.index.group(rank, dim).size());
    };
    const auto& passes = g.schedule.per_stage[static_cast<size_t>(s)];
    for (size_t pi = 0; pi < passes.size(); ++pi) {
      const Pass& pass = passes[pi];
      const auto vs = static_cast<size_t>(g.schedule.virtual_stage(s, pass.chunk));
      const auto& units = g.work.units[vs];
      if (g.split_pass(s, static_cast<int>(pi)) && !units.empty()) {
        for (const Unit& u : units) tasks += part_tasks(u.cost, pass.kind, replicas, group_size);
      } else {
        tasks += part_tasks(g.work.chunk_cost[vs], pass.kind, replicas, group_size);
      }
    }
  }
  const double hops = static_cast<double>(g.stages()) * g.chunks() - 1;
  tasks += 2 * replicas * g.micro_batches() * hops;
  return tasks * g.steps();
}

void check_task_budget(const StepGraph& g) {
  const double tasks = min_step_tasks(g);
  if (tasks <= static_cast<double>(MAX_ENGINE_TASKS)) return;
  throw ValidationError("tasks", sim::too_many_tasks(fmt::format(
                                     "at least {:.0f}, counted before it is built", tasks)));
}

}  // namespace loom::strategies
