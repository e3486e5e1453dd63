#pragma once
// DeepSpeed's pipeline engine (deepspeed/runtime/pipe/engine.py, schedule.py, p2p.py): its
// blocking transfers, as they couple neighbouring stages.
//
// TrainSchedule.steps runs 2 (m + p - 1) lockstep steps; each opens with the stage's
// transfers to one neighbour (SendGrad of the previous step's backward and RecvActivation
// before a forward; RecvGrad and SendActivation of the previous step's forward before a
// backward) and p2p.send / p2p.recv call dist.send / dist.recv (or a two-rank broadcast),
// which are synchronous: ProcessGroupNCCL's work.wait() makes the compute stream wait for the
// transfer. An NCCL send of more than its FIFO (NCCL_BUFFSIZE, 4 MiB) completes only once the
// receiver has posted the matching receive, which the receiver's host issues after the
// previous instruction's compute was enqueued (its NCCL stream waits for that compute).
// So a transfer starts after the receiver's pass before the consuming one, and the sender's
// next pass waits for it: neighbours meet at every step (a rendezvous), where Megatron's
// scheduler lets the sender run on.
// Lowered only for plan.framework deepspeed with pp > 1 (the engine has no interleaving).

#include "strategies/step/step_graph.hpp"

namespace loom::strategies {

/// Under DeepSpeed's pipeline engine, ties transfer `tr` of micro-batch `mb` (forward
/// activations from virtual stage `from_vs` to `to_vs`, or gradients back) to the sender's
/// next pass (it waits for the transfer) and to the receiver's pass before the consuming one
/// (the transfer waits for it), on replica `ri`. No-op for other frameworks.
inline void deepspeed_pipe_rendezvous(StepGraph& g, size_t ri, sim::TaskId tr, int mb, bool fwd,
                                      int from_vs, int to_vs) {
  if (g.plan.framework != models::Framework::DEEPSPEED || g.chunks() > 1) return;
  // The pass of `stage` `offset` places from (backward?, mb) in its order, or nullptr.
  auto neighbour = [&](int stage, bool backward, int offset) -> const PassTasks* {
    const auto& order = g.schedule.per_stage[static_cast<size_t>(stage)];
    for (size_t i = 0; i < order.size(); ++i) {
      const Pass& p = order[i];
      if (p.micro_batch != mb || (p.kind != PassKind::FORWARD) != backward) continue;
      const long j = static_cast<long>(i) + offset;
      if (j < 0 || j >= static_cast<long>(order.size())) return nullptr;
      const Pass& q = order[static_cast<size_t>(j)];
      return &g.pass_tasks[ri][g.pass_key(q.kind != PassKind::FORWARD, q.micro_batch,
                                          g.schedule.virtual_stage(stage, q.chunk))];
    }
    return nullptr;
  };
  const bool backward = !fwd;  // the sent pass and the consuming pass are of the same kind
  if (const PassTasks* next = neighbour(from_vs, backward, 1))
    g.engine.add_dependency(tr, next->first);
  if (const PassTasks* before = neighbour(to_vs, backward, -1))
    g.engine.add_dependency(before->last, tr);
}

}  // namespace loom::strategies
