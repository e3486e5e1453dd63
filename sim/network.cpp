// The network modes' registry, the Network base, the analytical and ideal modes and the
// alpha-beta batch time; the flow mode is flow_network.hpp.
#include "sim/network.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <span>
#include <unordered_map>

#include "common/error.hpp"
#include "sim/flow_network.hpp"

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
  const std::int64_t flows = std::int64_t{flow.count} * flow.copies;
  const double bytes = flow.bytes * static_cast<double>(flows);
  stats_.received_bytes[static_cast<size_t>(flow.dst)] += bytes;
  stats_.delivered_bytes += bytes;
  stats_.flows += flows;
  ++stats_.tallied;
}

void Network::tally_batch(const BatchSpec& batch) {
  if (batch.routes == nullptr || batch.count == 0) {
    for (std::size_t i = 0; i < batch.count; ++i) tally(batch.flows[i]);
    return;
  }
  auto [it, inserted] = pending_index_.emplace(batch.flows, pending_.size());
  if (inserted) {
    pending_.push_back({batch.flows, batch.count, 1});
  } else if (pending_[it->second].count == batch.count) {
    ++pending_[it->second].times;
  } else {  // another length from the same start: not the same batch
    for (std::size_t i = 0; i < batch.count; ++i) tally(batch.flows[i]);
  }
}

void Network::flush_tallies() const {
  for (const PendingTally& p : pending_) {
    const auto times = static_cast<double>(p.times);
    for (std::size_t i = 0; i < p.count; ++i) {
      const FlowSpec& flow = p.flows[i];
      const std::int64_t flows = std::int64_t{flow.count} * flow.copies;
      const double bytes = flow.bytes * static_cast<double>(flows) * times;
      stats_.received_bytes[static_cast<size_t>(flow.dst)] += bytes;
      stats_.delivered_bytes += bytes;
      stats_.flows += flows * p.times;
      ++stats_.tallied;
    }
  }
  pending_.clear();
  pending_index_.clear();
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
      load[l] += f.bytes * f.count * batch.wire_factor;
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
    tally_batch(batch);
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
