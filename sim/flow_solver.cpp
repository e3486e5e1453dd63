// The flow-level network's rate solver: the connected components of the flow-link sharing
// graph that a started or drained flow touches (breadth-first search over a per-link index,
// or one union-find pass over every active flow), re-filled max-min fairly by progressive
// filling. A max-min fair allocation decomposes over these components, so the others keep
// their rates exactly.
#include <algorithm>
#include <limits>

#include "sim/flow_network.hpp"

namespace loom::sim {

void FlowNetwork::clear_seeds() {
  for (topo::LinkId l : seed_links_) link_seeded_[static_cast<size_t>(l)] = 0;
  seed_links_.clear();
  changed_.clear();
}

void FlowNetwork::next_stamp() {
  if (++stamp_ == 0) {  // wrapped: no stale mark may equal a future stamp
    for (Flow& f : flows_) f.mark = 0;
    std::fill(link_mark_.begin(), link_mark_.end(), 0);
    stamp_ = 1;
  }
}

void FlowNetwork::count_solve(std::int64_t components, std::int64_t flows) {
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
void FlowNetwork::solve_components() {
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

// The batch whose flows are exactly the `n` active ones, all new (a collective step on an
// idle network), when it gives its routes: its components are a pure function of its
// flows, cached under its route table (BatchSpec::routes). nullptr otherwise.
const BatchSpec* FlowNetwork::fresh_batch(std::int32_t n) const {
  if (changed_.size() != active_.size()) return nullptr;
  const BatchId id = flows_[static_cast<size_t>(active_[0])].batch;
  const Batch& b = batches_[static_cast<size_t>(id)];
  return b.spec.routes && b.outstanding == n ? &b.spec : nullptr;
}

// Fills a fresh batch's flows with the component structure cached for it; false when none
// is cached.
bool FlowNetwork::reuse_structure(const BatchSpec& whole, std::int32_t n) {
  auto it = structures_.find({whole.routes, whole.flows});
  if (it == structures_.end() || static_cast<std::int32_t>(it->second.comp.size()) != n)
    return false;
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
  return true;
}

// Caches a fresh batch's component structure (bounded by MAX_CACHED_FLOWS in all).
void FlowNetwork::remember_structure(const BatchSpec& whole, std::int32_t n,
                                     std::int64_t components) {
  if (cached_flows_ + n > MAX_CACHED_FLOWS) return;
  Structure& st = structures_[{whole.routes, whole.flows}];
  cached_flows_ += n;
  st.comp.resize(static_cast<size_t>(n));
  for (std::int32_t i = 0; i < n; ++i)
    st.comp[static_cast<size_t>(i)] =
        flows_[static_cast<size_t>(active_[static_cast<size_t>(i)])].comp;
  st.links = comp_links_;
  st.link_comp.clear();
  for (topo::LinkId l : comp_links_) st.link_comp.push_back(link_comp_[static_cast<size_t>(l)]);
  st.components = components;
}

// The union-find root of position `i` in active_.
std::int32_t FlowNetwork::find_root(std::int32_t i) {
  while (parent_[static_cast<size_t>(i)] != i) {
    auto& p = parent_[static_cast<size_t>(i)];
    p = parent_[static_cast<size_t>(p)];  // path halving
    i = p;
  }
  return i;
}

// Joins the first `n` positions of active_ through each link's first flow (link_owner_),
// in creation order; lists every link they use in comp_links_.
void FlowNetwork::join_components(std::int32_t n) {
  parent_.resize(static_cast<size_t>(n));
  comp_links_.clear();
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
      std::int32_t a = find_root(i), b = find_root(owner);
      if (a != b) parent_[static_cast<size_t>(std::max(a, b))] = std::min(a, b);
    }
  }
}

// Names each flow's component (its root position) and marks the dirty ones: a component
// is dirty when it holds a new flow or a drained flow's link (or always, when `all_dirty`).
// Returns the number of dirty components.
std::int64_t FlowNetwork::mark_dirty_components(std::int32_t n, bool all_dirty) {
  dirty_root_.assign(static_cast<size_t>(n), all_dirty ? 1 : 0);
  if (!all_dirty) {
    for (topo::LinkId l : seed_links_) {
      const std::int32_t owner = link_owner_[static_cast<size_t>(l)];
      if (owner >= 0) dirty_root_[static_cast<size_t>(find_root(owner))] = 1;
    }
    next_stamp();
    for (std::int32_t s : changed_) flows_[static_cast<size_t>(s)].mark = stamp_;
  }
  std::int64_t components = 0;
  for (std::int32_t i = 0; i < n; ++i) {
    const std::int32_t r = find_root(i);
    Flow& f = flows_[static_cast<size_t>(active_[static_cast<size_t>(i)])];
    f.comp = r;
    if (!all_dirty && f.mark == stamp_) dirty_root_[static_cast<size_t>(r)] = 1;
  }
  for (std::int32_t i = 0; i < n; ++i) components += find_root(i) == i && dirty_root_[i];
  return components;
}

// Names each link's component, releases its owner, keeps only the dirty components' links
// in comp_links_ and drops the per-link index.
void FlowNetwork::keep_dirty_links() {
  size_t keep = 0;
  for (topo::LinkId l : comp_links_) {
    auto& owner = link_owner_[static_cast<size_t>(l)];
    const std::int32_t r = find_root(owner);
    link_comp_[static_cast<size_t>(l)] = r;
    owner = -1;
    if (index_valid_) link_flows_[static_cast<size_t>(l)].clear();
    if (dirty_root_[static_cast<size_t>(r)]) comp_links_[keep++] = l;
  }
  comp_links_.resize(keep);
  index_valid_ = false;
}

// Finds every component of the active flows in one sequential pass (union-find over flow
// positions in active_, creation order, joined through each link's first flow; a
// component is named by its root position) and re-fills those a change touched. Drops the
// per-link index (rebuilt by the next search), so steps where every flow is new never
// maintain it.
void FlowNetwork::solve_all_components() {
  const auto n = static_cast<std::int32_t>(active_.size());
  const BatchSpec* whole = fresh_batch(n);
  if (whole && reuse_structure(*whole, n)) return;
  join_components(n);
  // Only dirty components are filled, the others keep their rates.
  const bool all_dirty = !incremental_ || changed_.size() == active_.size();
  comp_.clear();
  const std::int64_t components = mark_dirty_components(n, all_dirty);
  keep_dirty_links();
  clear_seeds();
  if (all_dirty) {
    if (whole) remember_structure(*whole, n, components);
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
void FlowNetwork::fill(std::span<const std::int32_t> flows, std::span<const topo::LinkId> links,
                       std::int32_t num_components) {
  level_.resize(static_cast<size_t>(num_components));
  level_round_.assign(static_cast<size_t>(num_components), 0);
  std::int32_t round = 0;
  for (topo::LinkId l : links) remaining_cap_[l] = fabric_.capacity_Bpps(l);
  // count_ and remaining_cap_ count a flow standing for `count` identical flows `count`
  // times: the fair share and the capacity it takes are theirs.
  for (std::int32_t s : flows) {
    const Flow& f = flows_[static_cast<size_t>(s)];
    for (topo::LinkId l : fabric_.links(f.route)) count_[l] += f.count;
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
      const double taken = f.count == 1 ? f.rate : f.rate * f.count;
      for (topo::LinkId l : fabric_.links(f.route)) {
        remaining_cap_[l] = std::max(0.0, remaining_cap_[l] - taken);
        count_[l] -= f.count;
      }
    }
  }
  if (check_capacity_) {
    // Every flow on these links is in `flows`: their loads are complete.
    for (topo::LinkId l : links) remaining_cap_[l] = 0;  // reuse as a load accumulator
    for (std::int32_t s : flows) {
      const Flow& f = flows_[static_cast<size_t>(s)];
      for (topo::LinkId l : fabric_.links(f.route)) remaining_cap_[l] += f.rate * f.count;
    }
    for (topo::LinkId l : links) {
      stats_.max_link_load =
          std::max(stats_.max_link_load, remaining_cap_[l] / fabric_.capacity_Bpps(l));
    }
  }
  for (topo::LinkId l : links) count_[l] = 0;
}

}  // namespace loom::sim
