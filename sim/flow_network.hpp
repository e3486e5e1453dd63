#pragma once
// Internal to sim/: the flow-level network (NetworkMode::FLOW). Every flow follows its routed
// path and concurrent flows share each link max-min fairly. flow_network.cpp keeps the
// batches and flows over simulated time (start, advance, drain, deliver, memo); flow_solver.cpp
// finds the connected components of the flow-link sharing graph that changed and re-fills
// their rates by progressive filling. Invariants: `active_` holds the flows that still have
// bytes to send; their rates are a max-min fair allocation computed at `last_update_`; every
// link's summed rate is at most its capacity.
#include <cstdint>
#include <map>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/network.hpp"

namespace loom::sim {

/// The flow-level network (see file comment); make_network(NetworkMode::FLOW, ...) builds it.
class FlowNetwork final : public Network {
 public:
  FlowNetwork(Fabric& fabric, NetworkHost& host);
  NetworkMode mode() const override { return NetworkMode::FLOW; }
  void start_batch(SimTime now, const BatchSpec& batch, BatchId id) override;
  /// Creates the flows of batch `id` (started, or held back as a memo candidate) at `now`.
  void materialize(BatchId id, SimTime now);
  void on_wakeup(SimTime now, std::uint64_t token) override;

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
    std::int32_t count = 1;  // identical flows it stands for (FlowSpec::count)
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

  // Batches and flows over time (flow_network.cpp).
  void request_solve(SimTime now);
  void advance(SimTime now);
  void drain_finished(SimTime now);
  void deliver(const Flow& f, SimTime now);
  void finish_batch(BatchId id);
  bool try_memo(SimTime now);
  void solve_and_schedule(SimTime now);

  // Rates (flow_solver.cpp).
  void clear_seeds();
  void next_stamp();
  void count_solve(std::int64_t components, std::int64_t flows);
  void solve_components();
  void solve_all_components();
  const BatchSpec* fresh_batch(std::int32_t n) const;
  bool reuse_structure(const BatchSpec& whole, std::int32_t n);
  void remember_structure(const BatchSpec& whole, std::int32_t n, std::int64_t components);
  std::int32_t find_root(std::int32_t i);
  void join_components(std::int32_t n);
  std::int64_t mark_dirty_components(std::int32_t n, bool all_dirty);
  void keep_dirty_links();
  void fill(std::span<const std::int32_t> flows, std::span<const topo::LinkId> links,
            std::int32_t num_components);

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

}  // namespace loom::sim
