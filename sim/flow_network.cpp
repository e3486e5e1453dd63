// The flow-level network's batches and flows over simulated time: starting a batch (or
// holding back a memoised repeat), advancing the flows' remaining bytes, delivering the
// drained ones, completing batches. Rates come from flow_solver.cpp.
#include "sim/flow_network.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace loom::sim {

FlowNetwork::FlowNetwork(Fabric& fabric, NetworkHost& host) : Network(fabric, host) {
  auto n = static_cast<size_t>(fabric.num_links());
  count_.assign(n, 0);
  remaining_cap_.assign(n, 0.0);
  link_flows_.resize(n);
  link_mark_.assign(n, 0);
  link_seeded_.assign(n, 0);
  link_owner_.assign(n, -1);
  link_comp_.assign(n, 0);
  link_active_.assign(n, 0);
}

void FlowNetwork::start_batch(SimTime now, const BatchSpec& batch, BatchId id) {
  advance(now);
  if (deferred_ >= 0) materialize(deferred_, now);  // another batch joins: it must flow
  if (batches_.size() <= static_cast<size_t>(id)) batches_.resize(static_cast<size_t>(id) + 1);
  Batch& b = batches_[static_cast<size_t>(id)];
  b = Batch{};
  b.start = now;
  b.epoch = ++epoch_;
  b.solo = in_flight_ == 0;
  b.last_delivery = now;
  b.spec = batch;
  ++in_flight_;
  // A repeat of a memoised batch on an idle network is held back (no flows created)
  // until the solve instant decides whether the memo applies.
  if (memo_enabled_ && b.solo && batch.memo_key && active_.empty() && memo_.count(batch.memo_key)) {
    deferred_ = id;
    request_solve(now);
    return;
  }
  materialize(id, now);
}

void FlowNetwork::materialize(BatchId id, SimTime now) {
  if (deferred_ == id) deferred_ = -1;
  Batch& b = batches_[static_cast<size_t>(id)];
  const BatchSpec& batch = b.spec;
  for (std::size_t i = 0; i < batch.count; ++i) {
    const FlowSpec& spec = batch.flows[i];
    RouteRef r = batch.routes ? batch.routes[i] : fabric_.route(spec.src, spec.dst);
    double wire = spec.bytes * batch.wire_factor;
    ++b.outstanding;
    if (wire <= 0 || r.length == 0) {
      tally(spec);
      b.last_delivery = std::max(b.last_delivery, now + (batch.path_latency ? r.latency : 0));
      --b.outstanding;
      continue;
    }
    std::int32_t slot;
    if (!free_.empty()) {
      slot = free_.back();
      free_.pop_back();
    } else {
      slot = static_cast<std::int32_t>(flows_.size());
      flows_.emplace_back();
    }
    Flow& f = flows_[static_cast<size_t>(slot)];
    f.remaining = wire;
    f.rate = 0;
    f.cap = spec.max_rate_Bpps > 0 ? spec.max_rate_Bpps * batch.wire_factor
                                   : std::numeric_limits<double>::infinity();
    f.route = r;
    f.batch = id;
    f.spec = &spec;
    f.count = spec.count;
    f.seq = next_seq_++;
    f.mark = 0;
    f.active = true;
    for (topo::LinkId l : fabric_.links(r)) {
      ++link_active_[static_cast<size_t>(l)];
      if (index_valid_) link_flows_[static_cast<size_t>(l)].push_back(slot);
    }
    changed_.push_back(slot);
    active_.push_back(slot);
  }
  if (b.outstanding == 0) {
    finish_batch(id);
    return;
  }
  request_solve(now);
}

void FlowNetwork::on_wakeup(SimTime now, std::uint64_t token) {
  if (token == SOLVE_TOKEN) {
    solve_pending_ = false;
    if (try_memo(now)) return;
    if (!dirty_) return;
    solve_and_schedule(now);
    return;
  }
  if (token != generation_) return;  // superseded by a later solve
  advance(now);
  drain_finished(now);
  solve_and_schedule(now);
}

void FlowNetwork::request_solve(SimTime now) {
  dirty_ = true;
  if (!solve_pending_) {
    solve_pending_ = true;
    host_.schedule_network_wakeup(now, SOLVE_TOKEN);
  }
}

void FlowNetwork::advance(SimTime now) {
  if (now == last_update_) return;
  double dt = static_cast<double>(now - last_update_);
  for (std::int32_t s : active_) flows_[static_cast<size_t>(s)].remaining -= flows_[s].rate * dt;
  last_update_ = now;
}

// Delivers the flows within one picosecond of draining (times are integer ps). A drained flow's
// links that still carry flows seed the next component search; the drained slots leave their
// links' lists (when the index is kept) before they can be reused.
void FlowNetwork::drain_finished(SimTime now) {
  drained_.clear();
  size_t keep = 0;
  for (size_t i = 0; i < active_.size(); ++i) {
    std::int32_t s = active_[i];
    Flow& f = flows_[static_cast<size_t>(s)];
    if (f.remaining <= f.rate + 1e-9) {  // one picosecond at its rate
      f.active = false;
      drained_.push_back(s);
      deliver(f, now);
      free_.push_back(s);
    } else {
      active_[keep++] = s;
    }
  }
  if (drained_.empty()) return;
  dirty_ = true;
  active_.resize(keep);
  const size_t first_seed = seed_links_.size();
  for (std::int32_t s : drained_) {
    for (topo::LinkId l : fabric_.links(flows_[static_cast<size_t>(s)].route)) {
      const auto li = static_cast<size_t>(l);
      if (--link_active_[li] == 0) {
        if (index_valid_) link_flows_[li].clear();
      } else if (!link_seeded_[li]) {
        link_seeded_[li] = 1;
        seed_links_.push_back(l);
      }
    }
  }
  if (index_valid_) {
    for (size_t i = first_seed; i < seed_links_.size(); ++i) {
      auto& list = link_flows_[static_cast<size_t>(seed_links_[i])];
      list.erase(
          std::remove_if(list.begin(), list.end(),
                         [&](std::int32_t t) { return !flows_[static_cast<size_t>(t)].active; }),
          list.end());
    }
  }
}

void FlowNetwork::deliver(const Flow& f, SimTime now) {
  tally(*f.spec);
  Batch& b = batches_[static_cast<size_t>(f.batch)];
  b.last_delivery = std::max(b.last_delivery, now + (b.spec.path_latency ? f.route.latency : 0));
  if (--b.outstanding == 0) finish_batch(f.batch);
}

void FlowNetwork::finish_batch(BatchId id) {
  Batch& b = batches_[static_cast<size_t>(id)];
  --in_flight_;
  SimTime done = b.last_delivery + b.spec.overhead;
  // Memoise a batch that ran alone from start to end: its time is then a pure function
  // of its contents, and an identical batch on an idle network takes the same time.
  if (memo_enabled_ && b.spec.memo_key && b.solo && b.epoch == epoch_) {
    memo_.emplace(b.spec.memo_key, done - b.start);
  }
  host_.batch_done(id, done);
}

// Reuses a memoised batch time when exactly one fresh batch is in flight on an otherwise
// idle network and nothing else can happen before it would end.
bool FlowNetwork::try_memo(SimTime now) {
  if (deferred_ < 0) return false;
  const BatchId id = deferred_;
  Batch& b = batches_[static_cast<size_t>(id)];
  auto it = memo_.find(b.spec.memo_key);
  if (in_flight_ != 1 || !active_.empty() || b.start != now ||
      host_.next_event_time() < now + it->second) {
    materialize(id, now);
    return false;
  }
  deferred_ = -1;
  tally_batch(b.spec);
  dirty_ = false;
  ++generation_;  // cancels any pending completion wakeup
  --in_flight_;
  ++stats_.memo_hits;
  host_.batch_done(id, now + it->second);
  return true;
}

void FlowNetwork::solve_and_schedule(SimTime now) {
  dirty_ = false;
  ++generation_;
  if (active_.empty()) {
    clear_seeds();
    return;
  }
  // Every flow new (a collective step on an idle network) or a full re-solve: split all
  // active flows into components in one sequential pass. Otherwise search from the changes.
  // Without the per-link index (dropped by such a pass), a change touching many links is
  // also solved in one pass rather than by rebuilding the index. Same rates either way.
  const bool broad =
      changed_.size() == active_.size() ||
      (!index_valid_ && 4 * (changed_.size() + seed_links_.size()) >= active_.size());
  if (incremental_ && changed_.empty() && seed_links_.empty()) {
    // Only flows that were alone on their links drained: nothing to re-solve.
  } else if (!incremental_ || broad) {
    solve_all_components();
  } else {
    solve_components();
  }
  double next = std::numeric_limits<double>::infinity();
  for (std::int32_t s : active_) {
    const Flow& f = flows_[static_cast<size_t>(s)];
    next = std::min(next, f.remaining / f.rate);
  }
  SimTime dt = std::max<SimTime>(1, static_cast<SimTime>(std::ceil(next - 1e-9)));
  host_.schedule_network_wakeup(now + dt, generation_);
}

}  // namespace loom::sim
