#include "sim/network.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <span>
#include <unordered_map>

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
  // network_modes() lists the modes in enum order.
  const auto& modes = network_modes();
  std::vector<std::string> valid;
  for (std::size_t i = 0; i < modes.size(); ++i) {
    if (modes[i].first == name) return static_cast<NetworkMode>(i);
    valid.push_back(modes[i].first);
  }
  throw ValidationError::unknown_name(field, name, valid);
}

std::string to_string(NetworkMode mode) {
  return network_modes().at(static_cast<std::size_t>(mode)).first;
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
  thread_local std::vector<RouteRef> looked_up;
  if (load.size() < static_cast<size_t>(fabric.num_links())) load.assign(fabric.num_links(), 0.0);
  touched.clear();
  const RouteRef* routes = batch.routes;
  if (!routes) {  // one lookup per flow, shared by both passes
    looked_up.resize(batch.count);
    for (std::size_t i = 0; i < batch.count; ++i)
      looked_up[i] = fabric.route(batch.flows[i].src, batch.flows[i].dst);
    routes = looked_up.data();
  }
  for (std::size_t i = 0; i < batch.count; ++i) {
    const FlowSpec& f = batch.flows[i];
    const RouteRef& r = routes[i];
    for (topo::LinkId l : fabric.links(r)) {
      if (load[l] == 0.0) touched.push_back(l);
      load[l] += f.bytes * batch.wire_factor;
    }
  }
  double worst_ps = 0;
  for (std::size_t i = 0; i < batch.count; ++i) {
    const FlowSpec& f = batch.flows[i];
    const RouteRef& r = routes[i];
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
    link_flows_.resize(n);
    link_mark_.assign(n, 0);
    link_seeded_.assign(n, 0);
    link_owner_.assign(n, -1);
    link_comp_.assign(n, 0);
    link_active_.assign(n, 0);
  }
  NetworkMode mode() const override { return NetworkMode::FLOW; }

  void start_batch(SimTime now, const BatchSpec& batch, BatchId id) override {
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
    if (memo_enabled_ && b.solo && batch.memo_key && active_.empty() &&
        memo_.count(batch.memo_key)) {
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
    std::uint64_t seq = 0;   // creation order: the order flows are filled in (determinism)
    std::uint32_t mark = 0;  // component-search stamp
    std::int32_t comp = 0;   // its component in the current solve
    bool active = false;     // still sending (its slot is listed on its links)
    BatchId batch = 0;
    const FlowSpec* spec = nullptr;  // the caller's flow (valid until its batch completes)
  };
  struct Batch {
    SimTime start = 0;
    SimTime last_delivery = 0;
    std::uint64_t epoch = 0;
    std::int64_t outstanding = 0;
    bool solo = false;
    BatchSpec spec;  // as started (flows, overhead, memo key); flows are engine-owned
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

  // Delivers the flows within one picosecond of draining (times are integer ps). A drained flow's
  // links that still carry flows seed the next component search; the drained slots leave their
  // links' lists (when the index is kept) before they can be reused.
  void drain_finished(SimTime now) {
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

  void deliver(const Flow& f, SimTime now) {
    tally(*f.spec);
    Batch& b = batches_[static_cast<size_t>(f.batch)];
    b.last_delivery = std::max(b.last_delivery, now + (b.spec.path_latency ? f.route.latency : 0));
    if (--b.outstanding == 0) finish_batch(f.batch);
  }

  void finish_batch(BatchId id) {
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
  bool try_memo(SimTime now) {
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

  void clear_seeds() {
    for (topo::LinkId l : seed_links_) link_seeded_[static_cast<size_t>(l)] = 0;
    seed_links_.clear();
    changed_.clear();
  }

  void next_stamp() {
    if (++stamp_ == 0) {  // wrapped: no stale mark may equal a future stamp
      for (Flow& f : flows_) f.mark = 0;
      std::fill(link_mark_.begin(), link_mark_.end(), 0);
      stamp_ = 1;
    }
  }

  void count_solve(std::int64_t components, std::int64_t flows) {
    if (components == 0) return;
    ++stats_.rate_solves;
    stats_.components_solved += components;
    stats_.flows_resolved += flows;
    stats_.active_at_solves += static_cast<std::int64_t>(active_.size());
  }

  // Re-solves the connected components of the flow-link sharing graph that contain a
  // changed flow (started) or a seed link (a drained flow's link), found by breadth-first
  // search over the per-link index. A max-min fair allocation decomposes over these
  // components, so every other flow keeps its rate exactly.
  void solve_components() {
    if (!index_valid_) {  // dropped by solve_all_components: rebuild from the active flows
      for (std::int32_t s : active_) {
        for (topo::LinkId l : fabric_.links(flows_[static_cast<size_t>(s)].route))
          link_flows_[static_cast<size_t>(l)].push_back(s);
      }
      index_valid_ = true;
    }
    next_stamp();
    comp_.clear();
    comp_links_.clear();
    std::int32_t components = 0;
    auto grow = [&](size_t from) {  // BFS from comp_[from..] over shared links
      for (size_t i = from; i < comp_.size(); ++i) {
        const Flow& f = flows_[static_cast<size_t>(comp_[i])];
        for (topo::LinkId l : fabric_.links(f.route)) {
          auto& mark = link_mark_[static_cast<size_t>(l)];
          if (mark == stamp_) continue;
          mark = stamp_;
          link_comp_[static_cast<size_t>(l)] = components;
          comp_links_.push_back(l);
          for (std::int32_t t : link_flows_[static_cast<size_t>(l)]) {
            Flow& g = flows_[static_cast<size_t>(t)];
            if (g.mark == stamp_) continue;
            g.mark = stamp_;
            g.comp = components;
            comp_.push_back(t);
          }
        }
      }
      ++components;
    };
    for (std::int32_t s : changed_) {
      Flow& f = flows_[static_cast<size_t>(s)];
      if (!f.active || f.mark == stamp_) continue;
      f.mark = stamp_;
      f.comp = components;
      const size_t from = comp_.size();
      comp_.push_back(s);
      grow(from);
    }
    for (topo::LinkId l : seed_links_) {
      link_seeded_[static_cast<size_t>(l)] = 0;
      if (link_mark_[static_cast<size_t>(l)] == stamp_) continue;
      const size_t from = comp_.size();
      for (std::int32_t s : link_flows_[static_cast<size_t>(l)]) {
        Flow& f = flows_[static_cast<size_t>(s)];
        if (f.mark == stamp_) continue;
        f.mark = stamp_;
        f.comp = components;
        comp_.push_back(s);
      }
      if (comp_.size() > from) grow(from);
    }
    seed_links_.clear();
    changed_.clear();
    // Creation order, as the full pass fills them.
    std::sort(comp_.begin(), comp_.end(), [&](std::int32_t a, std::int32_t b) {
      return flows_[static_cast<size_t>(a)].seq < flows_[static_cast<size_t>(b)].seq;
    });
    fill(comp_, comp_links_, components);
    count_solve(components, static_cast<std::int64_t>(comp_.size()));
  }

  // Finds every component of the active flows in one sequential pass (union-find over flow
  // positions in active_, creation order, joined through each link's first flow; a
  // component is named by its root position) and re-fills those a change touched. Drops the
  // per-link index (rebuilt by the next search), so steps where every flow is new never maintain
  // it.
  void solve_all_components() {
    const auto n = static_cast<std::int32_t>(active_.size());
    // The active flows are exactly one fresh batch's: its components are a pure function of
    // its flows, cached under its route table (BatchSpec::routes).
    const BatchSpec* whole = nullptr;
    if (changed_.size() == active_.size()) {
      const BatchId id = flows_[static_cast<size_t>(active_[0])].batch;
      const Batch& b = batches_[static_cast<size_t>(id)];
      if (b.spec.routes && b.outstanding == n) whole = &b.spec;
    }
    if (whole) {
      auto it = structures_.find({whole->routes, whole->flows});
      if (it != structures_.end() && static_cast<std::int32_t>(it->second.comp.size()) == n) {
        const Structure& st = it->second;
        for (std::int32_t i = 0; i < n; ++i)
          flows_[static_cast<size_t>(active_[static_cast<size_t>(i)])].comp = st.comp[i];
        comp_links_.assign(st.links.begin(), st.links.end());
        for (size_t k = 0; k < st.links.size(); ++k) {
          link_comp_[static_cast<size_t>(st.links[k])] = st.link_comp[k];
          if (index_valid_) link_flows_[static_cast<size_t>(st.links[k])].clear();
        }
        index_valid_ = false;
        clear_seeds();
        fill(active_, comp_links_, n);
        count_solve(st.components, n);
        return;
      }
    }
    parent_.resize(static_cast<size_t>(n));
    comp_links_.clear();
    auto find = [&](std::int32_t i) {
      while (parent_[static_cast<size_t>(i)] != i) {
        auto& p = parent_[static_cast<size_t>(i)];
        p = parent_[static_cast<size_t>(p)];  // path halving
        i = p;
      }
      return i;
    };
    for (std::int32_t i = 0; i < n; ++i) {
      parent_[static_cast<size_t>(i)] = i;
      const Flow& f = flows_[static_cast<size_t>(active_[static_cast<size_t>(i)])];
      for (topo::LinkId l : fabric_.links(f.route)) {
        auto& owner = link_owner_[static_cast<size_t>(l)];
        if (owner < 0) {
          owner = i;
          comp_links_.push_back(l);
          continue;
        }
        std::int32_t a = find(i), b = find(owner);
        if (a != b) parent_[static_cast<size_t>(std::max(a, b))] = std::min(a, b);
      }
    }
    // A component is dirty when it holds a new flow or a drained flow's link (or always,
    // in a full re-solve); only dirty components are filled, the others keep their rates.
    const bool all_dirty = !incremental_ || changed_.size() == active_.size();
    dirty_root_.assign(static_cast<size_t>(n), all_dirty ? 1 : 0);
    if (!all_dirty) {
      for (topo::LinkId l : seed_links_) {
        const std::int32_t owner = link_owner_[static_cast<size_t>(l)];
        if (owner >= 0) dirty_root_[static_cast<size_t>(find(owner))] = 1;
      }
      next_stamp();
      for (std::int32_t s : changed_) flows_[static_cast<size_t>(s)].mark = stamp_;
    }
    comp_.clear();
    std::int64_t components = 0;
    for (std::int32_t i = 0; i < n; ++i) {
      const std::int32_t r = find(i);
      Flow& f = flows_[static_cast<size_t>(active_[static_cast<size_t>(i)])];
      f.comp = r;
      if (!all_dirty && f.mark == stamp_) dirty_root_[static_cast<size_t>(r)] = 1;
    }
    for (std::int32_t i = 0; i < n; ++i) components += find(i) == i && dirty_root_[i];
    size_t keep = 0;
    for (topo::LinkId l : comp_links_) {
      auto& owner = link_owner_[static_cast<size_t>(l)];
      const std::int32_t r = find(owner);
      link_comp_[static_cast<size_t>(l)] = r;
      owner = -1;
      if (index_valid_) link_flows_[static_cast<size_t>(l)].clear();
      if (dirty_root_[static_cast<size_t>(r)]) comp_links_[keep++] = l;
    }
    comp_links_.resize(keep);
    index_valid_ = false;
    clear_seeds();
    if (all_dirty) {
      if (whole && cached_flows_ + n <= MAX_CACHED_FLOWS) {
        Structure& st = structures_[{whole->routes, whole->flows}];
        cached_flows_ += n;
        st.comp.resize(static_cast<size_t>(n));
        for (std::int32_t i = 0; i < n; ++i)
          st.comp[static_cast<size_t>(i)] =
              flows_[static_cast<size_t>(active_[static_cast<size_t>(i)])].comp;
        st.links = comp_links_;
        st.link_comp.clear();
        for (topo::LinkId l : comp_links_)
          st.link_comp.push_back(link_comp_[static_cast<size_t>(l)]);
        st.components = components;
      }
      fill(active_, comp_links_, n);
      count_solve(components, n);
      return;
    }
    for (std::int32_t s : active_) {
      if (dirty_root_[static_cast<size_t>(flows_[static_cast<size_t>(s)].comp)]) comp_.push_back(s);
    }
    fill(comp_, comp_links_, n);
    count_solve(components, static_cast<std::int64_t>(comp_.size()));
  }

  // Progressive filling of whole components (`flows` in creation order, `links` every link
  // they use; Flow::comp and link_comp_ name each one's component, < num_components). In
  // each component independently: raise every unfrozen flow's rate together; the link whose
  // remaining capacity per unfrozen flow is smallest saturates first and freezes its flows
  // at that share (or a flow's own ceiling is reached first); repeat on the rest. Rounds run
  // in all components at once, but no value crosses components, so a component's rates are
  // a pure function of its flows: incremental and full re-solves agree bit for bit.
  // Symmetric steps finish in one or two rounds.
  void fill(std::span<const std::int32_t> flows, std::span<const topo::LinkId> links,
            std::int32_t num_components) {
    level_.resize(static_cast<size_t>(num_components));
    level_round_.assign(static_cast<size_t>(num_components), 0);
    std::int32_t round = 0;
    for (topo::LinkId l : links) remaining_cap_[l] = fabric_.capacity_Bpps(l);
    for (std::int32_t s : flows) {
      for (topo::LinkId l : fabric_.links(flows_[static_cast<size_t>(s)].route)) ++count_[l];
    }
    unfrozen_.assign(flows.begin(), flows.end());
    while (!unfrozen_.empty()) {
      // Each component's next level: its tightest link's fair share, or its lowest ceiling.
      ++round;
      for (std::int32_t s : unfrozen_) {
        const Flow& f = flows_[static_cast<size_t>(s)];
        const auto c = static_cast<size_t>(f.comp);
        if (level_round_[c] != round) {
          level_round_[c] = round;
          level_[c] = f.cap;
        } else {
          level_[c] = std::min(level_[c], f.cap);
        }
      }
      for (topo::LinkId l : links) {
        if (count_[l] == 0) continue;
        auto& level = level_[static_cast<size_t>(link_comp_[static_cast<size_t>(l)])];
        level = std::min(level, remaining_cap_[l] / count_[l]);
      }
      frozen_.clear();
      size_t keep = 0;
      for (std::int32_t s : unfrozen_) {
        Flow& f = flows_[static_cast<size_t>(s)];
        const double level = level_[static_cast<size_t>(f.comp)];
        const double limit = level * (1 + 1e-12);
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
      // Every flow on these links is in `flows`: their loads are complete.
      for (topo::LinkId l : links) remaining_cap_[l] = 0;  // reuse as a load accumulator
      for (std::int32_t s : flows) {
        const Flow& f = flows_[static_cast<size_t>(s)];
        for (topo::LinkId l : fabric_.links(f.route)) remaining_cap_[l] += f.rate;
      }
      for (topo::LinkId l : links) {
        stats_.max_link_load =
            std::max(stats_.max_link_load, remaining_cap_[l] / fabric_.capacity_Bpps(l));
      }
    }
    for (topo::LinkId l : links) count_[l] = 0;
  }

  std::vector<Flow> flows_;
  std::vector<std::int32_t> free_;
  std::vector<std::int32_t> active_;
  std::vector<std::int32_t> unfrozen_;
  std::vector<std::int32_t> frozen_;
  std::vector<Batch> batches_;
  std::vector<std::int32_t> count_;
  std::vector<double> remaining_cap_;
  std::vector<std::vector<std::int32_t>> link_flows_;  // per link: active flows on it
  std::vector<std::uint32_t> link_mark_;               // per link: component-search stamp
  std::vector<std::uint8_t> link_seeded_;              // per link: listed in seed_links_
  std::vector<std::int32_t> drained_;                  // scratch: flows drained this instant
  bool index_valid_ = true;                            // link_flows_ lists every active flow
  std::vector<std::int32_t> changed_;                  // flows started since the last solve
  std::vector<topo::LinkId> seed_links_;               // links of flows drained since then
  std::vector<std::int32_t> comp_;                     // the component being solved
  std::vector<topo::LinkId> comp_links_;               // its links
  std::vector<std::int32_t> link_owner_;               // per link: first flow position on it (-1)
  // Components of a batch that ran with every flow new, by (routes, flows) pointers.
  struct Structure {
    std::vector<std::int32_t> comp;  // per materialised flow: its component (root position)
    std::vector<topo::LinkId> links;
    std::vector<std::int32_t> link_comp;
    std::int64_t components = 0;
  };
  static constexpr std::int64_t MAX_CACHED_FLOWS = 1 << 24;
  std::map<std::pair<const RouteRef*, const FlowSpec*>, Structure> structures_;  // lookup only
  std::int64_t cached_flows_ = 0;
  std::vector<std::int32_t> link_active_;  // per link: active flows on it
  std::vector<std::int32_t> link_comp_;    // per link: its component in the current solve
  std::vector<double> level_;              // per component: the current filling level
  std::vector<std::int32_t> level_round_;  // per component: the round level_ belongs to
  std::vector<std::uint8_t> dirty_root_;   // per component root: to be filled
  std::vector<std::int32_t> parent_;       // union-find over positions in active_
  std::uint64_t next_seq_ = 0;
  std::uint32_t stamp_ = 0;  // wraps after 4e9 solves: marks are cleared then
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
