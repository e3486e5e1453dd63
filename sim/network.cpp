#include "sim/network.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.hpp"

namespace loom::sim {

const std::vector<std::pair<std::string, std::string>>& network_modes() {
  static const std::vector<std::pair<std::string, std::string>> modes = {
      {"flow", "flow-level: max-min fair sharing of every link by concurrent flows"},
      {"analytical", "alpha-beta per step, contention from the step's own link loads"},
      {"ideal", "infinite bandwidth, zero latency"},
  };
  return modes;
}

NetworkMode parse_network_mode(std::string_view name, std::string_view field) {
  if (name == "flow") return NetworkMode::FLOW;
  if (name == "analytical") return NetworkMode::ANALYTICAL;
  if (name == "ideal") return NetworkMode::IDEAL;
  std::vector<std::string> valid;
  for (const auto& m : network_modes()) valid.push_back(m.first);
  throw ValidationError::unknown_name(field, name, valid);
}

std::string to_string(NetworkMode mode) {
  switch (mode) {
    case NetworkMode::FLOW:
      return "flow";
    case NetworkMode::ANALYTICAL:
      return "analytical";
    case NetworkMode::IDEAL:
      return "ideal";
  }
  return "?";
}

Network::Network(Fabric& fabric, NetworkHost& host) : fabric_(fabric), host_(host) {
  stats_.received_bytes.assign(fabric.cluster().vertices().size(), 0.0);
}

void Network::tally(const FlowSpec& flow) {
  stats_.received_bytes[static_cast<size_t>(flow.dst)] += flow.bytes;
  stats_.delivered_bytes += flow.bytes;
  ++stats_.flows;
}

SimTime analytical_batch_time(Fabric& fabric, const BatchSpec& batch) {
  // Per link: wire bytes the batch puts on it. Per flow: path latency plus its most loaded
  // link's drain time. Scratch arrays persist across calls (hot in the tuner).
  thread_local std::vector<double> load;
  thread_local std::vector<topo::LinkId> touched;
  if (load.size() < static_cast<size_t>(fabric.num_links())) load.assign(fabric.num_links(), 0.0);
  touched.clear();
  for (std::size_t i = 0; i < batch.count; ++i) {
    const FlowSpec& f = batch.flows[i];
    RouteRef r = fabric.route(f.src, f.dst);
    for (topo::LinkId l : fabric.links(r)) {
      if (load[l] == 0.0) touched.push_back(l);
      load[l] += f.bytes * batch.wire_factor;
    }
  }
  double worst_ps = 0;
  for (std::size_t i = 0; i < batch.count; ++i) {
    const FlowSpec& f = batch.flows[i];
    RouteRef r = fabric.route(f.src, f.dst);
    double drain = 0;
    for (topo::LinkId l : fabric.links(r))
      drain = std::max(drain, load[l] / fabric.capacity_Bpps(l));
    if (f.max_rate_Bpps > 0 && r.length > 0) drain = std::max(drain, f.bytes / f.max_rate_Bpps);
    const double latency = batch.path_latency ? static_cast<double>(r.latency) : 0.0;
    worst_ps = std::max(worst_ps, latency + drain);
  }
  for (topo::LinkId l : touched) load[l] = 0.0;
  return static_cast<SimTime>(std::ceil(worst_ps)) + batch.overhead;
}

namespace {

class IdealNetwork final : public Network {
 public:
  IdealNetwork(Fabric& fabric, NetworkHost& host) : Network(fabric, host) {}
  NetworkMode mode() const override { return NetworkMode::IDEAL; }
  void start_batch(SimTime now, const BatchSpec& batch, BatchId id) override {
    for (std::size_t i = 0; i < batch.count; ++i) tally(batch.flows[i]);
    host_.batch_done(id, now);
  }
  void on_wakeup(SimTime, std::uint64_t) override {}
};

class AnalyticalNetwork final : public Network {
 public:
  AnalyticalNetwork(Fabric& fabric, NetworkHost& host) : Network(fabric, host) {}
  NetworkMode mode() const override { return NetworkMode::ANALYTICAL; }
  void start_batch(SimTime now, const BatchSpec& batch, BatchId id) override {
    for (std::size_t i = 0; i < batch.count; ++i) tally(batch.flows[i]);
    SimTime t;
    auto it = batch.memo_key ? memo_.find(batch.memo_key) : memo_.end();
    if (it != memo_.end()) {
      t = it->second;
      ++stats_.memo_hits;
    } else {
      t = analytical_batch_time(fabric_, batch);
      if (batch.memo_key) memo_.emplace(batch.memo_key, t);
    }
    host_.batch_done(id, now + t);
  }
  void on_wakeup(SimTime, std::uint64_t) override {}

 private:
  std::unordered_map<std::uint64_t, SimTime> memo_;  // lookup only
};

// Flow-level network. Invariants: `active_` holds the flows that still have bytes to send;
// their rates are a max-min fair allocation computed at `last_update_`; every link's
// summed rate is at most its capacity.
class FlowNetwork final : public Network {
 public:
  FlowNetwork(Fabric& fabric, NetworkHost& host) : Network(fabric, host) {
    auto n = static_cast<size_t>(fabric.num_links());
    count_.assign(n, 0);
    remaining_cap_.assign(n, 0.0);
  }
  NetworkMode mode() const override { return NetworkMode::FLOW; }

  void start_batch(SimTime now, const BatchSpec& batch, BatchId id) override {
    advance(now);
    if (deferred_ >= 0) materialize(deferred_, now);  // another batch joins: it must flow
    if (batches_.size() <= static_cast<size_t>(id)) batches_.resize(static_cast<size_t>(id) + 1);
    Batch& b = batches_[static_cast<size_t>(id)];
    b = Batch{};
    b.start = now;
    b.overhead = batch.overhead;
    b.memo_key = batch.memo_key;
    b.epoch = ++epoch_;
    b.solo = in_flight_ == 0;
    b.last_delivery = now;
    b.spec = batch;
    ++in_flight_;
    // A repeat of a memoised batch on an idle network is held back (no flows created)
    // until the solve instant decides whether the memo applies.
    if (memo_enabled_ && b.solo && b.memo_key && active_.empty() && memo_.count(b.memo_key)) {
      deferred_ = id;
      request_solve(now);
      return;
    }
    materialize(id, now);
  }

  void materialize(BatchId id, SimTime now) {
    if (deferred_ == id) deferred_ = -1;
    Batch& b = batches_[static_cast<size_t>(id)];
    const BatchSpec& batch = b.spec;
    for (std::size_t i = 0; i < batch.count; ++i) {
      const FlowSpec& spec = batch.flows[i];
      RouteRef r = fabric_.route(spec.src, spec.dst);
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
      f.spec = spec;
      active_.push_back(slot);
    }
    if (b.outstanding == 0) {
      finish_batch(id);
      return;
    }
    request_solve(now);
  }

  void on_wakeup(SimTime now, std::uint64_t token) override {
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

 private:
  static constexpr std::uint64_t SOLVE_TOKEN = ~std::uint64_t{0};

  struct Flow {
    double remaining = 0;  // wire bytes
    double rate = 0;       // wire bytes per picosecond
    double cap = 0;        // ceiling on rate, wire bytes per picosecond (infinity: none)
    RouteRef route;
    BatchId batch = 0;
    FlowSpec spec;
  };
  struct Batch {
    SimTime start = 0;
    SimTime last_delivery = 0;
    SimTime overhead = 0;
    std::uint64_t memo_key = 0;
    std::uint64_t epoch = 0;
    std::int64_t outstanding = 0;
    bool solo = false;
    BatchSpec spec;  // the caller's flows; they outlive the batch (engine-owned schedules)
  };

  void request_solve(SimTime now) {
    dirty_ = true;
    if (!solve_pending_) {
      solve_pending_ = true;
      host_.schedule_network_wakeup(now, SOLVE_TOKEN);
    }
  }

  void advance(SimTime now) {
    if (now == last_update_) return;
    double dt = static_cast<double>(now - last_update_);
    for (std::int32_t s : active_) flows_[static_cast<size_t>(s)].remaining -= flows_[s].rate * dt;
    last_update_ = now;
  }

  // A flow within one picosecond of draining has drained (times are integer ps).
  void drain_finished(SimTime now) {
    size_t keep = 0;
    for (size_t i = 0; i < active_.size(); ++i) {
      std::int32_t s = active_[i];
      Flow& f = flows_[static_cast<size_t>(s)];
      if (f.remaining <= f.rate * 1.0 + 1e-9) {
        deliver(f, now);
        free_.push_back(s);
      } else {
        active_[keep++] = s;
      }
    }
    if (keep != active_.size()) dirty_ = true;
    active_.resize(keep);
  }

  void deliver(const Flow& f, SimTime now) {
    tally(f.spec);
    Batch& b = batches_[static_cast<size_t>(f.batch)];
    b.last_delivery = std::max(b.last_delivery, now + (b.spec.path_latency ? f.route.latency : 0));
    if (--b.outstanding == 0) finish_batch(f.batch);
  }

  void finish_batch(BatchId id) {
    Batch& b = batches_[static_cast<size_t>(id)];
    --in_flight_;
    SimTime done = b.last_delivery + b.overhead;
    // Memoise a batch that ran alone from start to end: its time is then a pure function
    // of its contents, and an identical batch on an idle network takes the same time.
    if (memo_enabled_ && b.memo_key && b.solo && b.epoch == epoch_) {
      memo_.emplace(b.memo_key, done - b.start);
    }
    host_.batch_done(id, done);
  }

  // Reuses a memoised batch time when exactly one fresh batch is in flight on an otherwise
  // idle network and nothing else can happen before it would end.
  bool try_memo(SimTime now) {
    if (deferred_ < 0) return false;
    const BatchId id = deferred_;
    Batch& b = batches_[static_cast<size_t>(id)];
    auto it = memo_.find(b.memo_key);
    if (in_flight_ != 1 || !active_.empty() || b.start != now ||
        host_.next_event_time() < now + it->second) {
      materialize(id, now);
      return false;
    }
    deferred_ = -1;
    for (std::size_t i = 0; i < b.spec.count; ++i) tally(b.spec.flows[i]);
    dirty_ = false;
    ++generation_;  // cancels any pending completion wakeup
    --in_flight_;
    ++stats_.memo_hits;
    host_.batch_done(id, now + it->second);
    return true;
  }

  void solve_and_schedule(SimTime now) {
    dirty_ = false;
    ++generation_;
    if (active_.empty()) return;
    solve();
    double next = std::numeric_limits<double>::infinity();
    for (std::int32_t s : active_) {
      const Flow& f = flows_[static_cast<size_t>(s)];
      next = std::min(next, f.remaining / f.rate);
    }
    SimTime dt = std::max<SimTime>(1, static_cast<SimTime>(std::ceil(next - 1e-9)));
    host_.schedule_network_wakeup(now + dt, generation_);
  }

  // Progressive filling: raise every unfrozen flow's rate together; the link whose
  // remaining capacity per unfrozen flow is smallest saturates first and freezes its flows
  // at that share; repeat on the rest. Symmetric steps finish in one or two rounds.
  void solve() {
    ++stats_.rate_solves;
    touched_.clear();
    for (std::int32_t s : active_) {
      const Flow& f = flows_[static_cast<size_t>(s)];
      for (topo::LinkId l : fabric_.links(f.route)) {
        if (count_[l]++ == 0) {
          touched_.push_back(l);
          remaining_cap_[l] = fabric_.capacity_Bpps(l);
        }
      }
    }
    unfrozen_.assign(active_.begin(), active_.end());
    while (!unfrozen_.empty()) {
      // The next level: the tightest link's fair share, or the lowest flow ceiling.
      double level = std::numeric_limits<double>::infinity();
      for (topo::LinkId l : touched_) {
        if (count_[l] > 0) level = std::min(level, remaining_cap_[l] / count_[l]);
      }
      for (std::int32_t s : unfrozen_) level = std::min(level, flows_[static_cast<size_t>(s)].cap);
      const double limit = level * (1 + 1e-12);
      frozen_.clear();
      size_t keep = 0;
      for (std::int32_t s : unfrozen_) {
        Flow& f = flows_[static_cast<size_t>(s)];
        bool bottleneck = f.cap <= limit;
        for (topo::LinkId l : fabric_.links(f.route)) {
          if (bottleneck) break;
          bottleneck = remaining_cap_[l] / count_[l] <= limit;
        }
        if (bottleneck) {
          f.rate = std::min(level, f.cap);
          frozen_.push_back(s);
        } else {
          unfrozen_[keep++] = s;
        }
      }
      unfrozen_.resize(keep);
      for (std::int32_t s : frozen_) {
        const Flow& f = flows_[static_cast<size_t>(s)];
        for (topo::LinkId l : fabric_.links(f.route)) {
          remaining_cap_[l] = std::max(0.0, remaining_cap_[l] - f.rate);
          --count_[l];
        }
      }
    }
    if (check_capacity_) {
      for (topo::LinkId l : touched_) remaining_cap_[l] = 0;  // reuse as a load accumulator
      for (std::int32_t s : active_) {
        const Flow& f = flows_[static_cast<size_t>(s)];
        for (topo::LinkId l : fabric_.links(f.route)) remaining_cap_[l] += f.rate;
      }
      for (topo::LinkId l : touched_) {
        stats_.max_link_load =
            std::max(stats_.max_link_load, remaining_cap_[l] / fabric_.capacity_Bpps(l));
      }
    }
    for (topo::LinkId l : touched_) count_[l] = 0;
  }

  std::vector<Flow> flows_;
  std::vector<std::int32_t> free_;
  std::vector<std::int32_t> active_;
  std::vector<std::int32_t> unfrozen_;
  std::vector<std::int32_t> frozen_;
  std::vector<Batch> batches_;
  std::vector<std::int32_t> count_;
  std::vector<double> remaining_cap_;
  std::vector<topo::LinkId> touched_;
  std::unordered_map<std::uint64_t, SimTime> memo_;  // lookup only
  SimTime last_update_ = 0;
  std::uint64_t generation_ = 0;
  std::uint64_t epoch_ = 0;
  std::int64_t in_flight_ = 0;
  BatchId deferred_ = -1;  // a memo candidate whose flows are not yet created
  bool dirty_ = false;
  bool solve_pending_ = false;
};

}  // namespace

std::unique_ptr<Network> make_network(NetworkMode mode, Fabric& fabric, NetworkHost& host) {
  switch (mode) {
    case NetworkMode::FLOW:
      return std::make_unique<FlowNetwork>(fabric, host);
    case NetworkMode::ANALYTICAL:
      return std::make_unique<AnalyticalNetwork>(fabric, host);
    case NetworkMode::IDEAL:
      return std::make_unique<IdealNetwork>(fabric, host);
  }
  throw InternalError("unknown network mode");
}

}  // namespace loom::sim
