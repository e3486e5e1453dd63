// NCCL's view of a group (nccl_shape, measured on loom's rings) and the costs NCCL's model
// charges a lowered schedule: protocol bandwidth factors and caps, base latency and step
// latencies by latency class.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "sim/collective_lowering.hpp"
#include "sim/nccl_constants.hpp"
#include "sim/nccl_model.hpp"

namespace loom::sim {

using Op = CollectiveOp;

namespace {

enum class HopFilter { ALL, INSIDE_NODES, BETWEEN_NODES };

// Each rank's send rate (GB/s) in one uncontended step of the rings `orders`, counting only
// the hops `filter` admits: one byte per flow, the busiest link's load over its capacity,
// times the number of rings. 0 when no hop is counted.
double ring_step_GBps(Fabric& fabric, const ScheduleBuilder& b,
                      const std::vector<std::vector<int>>& orders, HopFilter filter) {
  // Per-link load in a scratch buffer sized to the fabric once and reset only where touched:
  // this runs for every point-to-point send of a lowered step, and a fresh fabric-sized
  // vector per call dominated --full runs.
  thread_local std::vector<double> load;
  thread_local std::vector<topo::LinkId> touched;
  if (load.size() < static_cast<size_t>(fabric.num_links()))
    load.assign(static_cast<size_t>(fabric.num_links()), 0.0);
  touched.clear();
  double ps_per_byte = 0;
  for (const auto& order : orders) {
    for (size_t i = 0; i < order.size(); ++i) {
      const int from = order[i], to = order[(i + 1) % order.size()];
      if (filter != HopFilter::ALL &&
          (b.node(from) == b.node(to)) != (filter == HopFilter::INSIDE_NODES))
        continue;
      RouteRef r = fabric.route(b.v(from), b.v(to));
      for (topo::LinkId l : fabric.links(r)) {
        double& x = load[static_cast<size_t>(l)];
        if (x == 0.0) touched.push_back(l);
        x += 1.0;
        ps_per_byte = std::max(ps_per_byte, x / fabric.capacity_Bpps(l));
      }
    }
  }
  for (topo::LinkId l : touched) load[static_cast<size_t>(l)] = 0.0;
  if (!(ps_per_byte > 0)) return 0;
  return static_cast<double>(orders.size()) / ps_per_byte * static_cast<double>(PS_PER_SECOND) /
         1e9;
}

}  // namespace

NcclShape nccl_shape(Fabric& fabric, const std::vector<int>& ranks) {
  ScheduleBuilder b(fabric, ranks);
  const auto& gpu = fabric.cluster().gpu;
  NcclShape shape;
  shape.ranks = b.n();
  const auto nodes = b.nodes();
  shape.nodes = static_cast<int>(nodes.size());
  shape.arch = nccl_arch(gpu);
  shape.channels = nccl_channels(gpu);
  shape.tuning = fabric.tuning();
  for (const auto& node : nodes) {
    if (node.size() >= 2) {
      shape.intra = static_cast<LatencyClass>(b.route_class(node[0], node[1]));
      break;
    }
  }
  if (b.n() < 2) return shape;
  // The raw bus bandwidth (NCCL: nChannels x bw from its topology search) is the rate at
  // which each rank sends in one uncontended step of loom's rings.
  shape.bus_bandwidth_GBps = ring_step_GBps(fabric, b, ring_orders(b), HopFilter::ALL);
  return shape;
}

void nccl_split_bus_bandwidth(Fabric& fabric, const std::vector<int>& ranks, NcclShape& shape) {
  ScheduleBuilder b(fabric, ranks);
  const auto nodes = b.nodes();
  // bwIntra: a ring over the first node's ranks alone (the rings across nodes leave each
  // node once per ring, which would overstate it); bwInter: the hops between nodes.
  std::vector<int> local;
  for (int i : nodes.front()) local.push_back(ranks[static_cast<size_t>(i)]);
  ScheduleBuilder one(fabric, local);
  shape.intra_bus_GBps =
      local.size() < 2 ? 0 : ring_step_GBps(fabric, one, ring_orders(one), HopFilter::ALL);
  shape.inter_bus_GBps = ring_step_GBps(fabric, b, ring_orders(b), HopFilter::BETWEEN_NODES);
}

namespace {

// Bandwidth: NCCL's multiplicative refinements slow the wire (LL's 8-byte stores carry 4
// bytes, etc.); its absolute caps (llMaxBw, nChannels x perChMax) bound each rank's send
// rate, shared by the rank's flows of a step.
void apply_bandwidth(Fabric& fabric, const CollectiveRequest& req, Op op, double S,
                     const NcclShape& shape, CollectiveSchedule& s) {
  const Algorithm a = s.algorithm;
  const Protocol protocol = s.protocol;
  double factor, cap_GBps;
  if (a == Algorithm::NVLS_TREE) {
    // nvlsEfficiency slows the NVLink SHARP part only (flows to and from the switches); the
    // rails run at the NIC rate: NCCL's min(intraBw, interBw), each with its own factor.
    const double nvls = nccl_nvls_factor(shape);
    const auto& cluster = fabric.cluster();
    for (auto& f : s.flows) {
      if (cluster.vertex(f.src).kind == topo::VertexKind::NVSWITCH ||
          cluster.vertex(f.dst).kind == topo::VertexKind::NVSWITCH)
        f.bytes /= nvls;
    }
    factor = 1.0;
    cap_GBps = std::numeric_limits<double>::infinity();
  } else if (a == Algorithm::NVLS) {
    // The tuner's own factor (per architecture), so lowering and choice agree.
    factor = nccl_nvls_factor(shape);
    cap_GBps = std::numeric_limits<double>::infinity();
  } else {
    NcclBandwidth bw = nccl_bus_bandwidth(a, protocol, op, shape);
    factor = bw.factor;
    cap_GBps = bw.cap_GBps;
    if (a == Algorithm::TREE) {
      const double corr = nccl_tree_correction(protocol, S);
      factor *= corr;
      cap_GBps *= corr;
    }
  }
  s.wire_factor = req.contention / factor;
  if (std::isfinite(cap_GBps)) {
    const double cap_Bpps = cap_GBps * 1e9 / static_cast<double>(PS_PER_SECOND);
    std::map<topo::VertexId, int> out_degree;
    for (int p = 0; p < s.num_patterns(); ++p) {
      out_degree.clear();
      for (auto i = s.pattern_begin[p]; i < s.pattern_begin[p + 1]; ++i)
        out_degree[s.flows[i].src] += s.flows[i].count;
      for (auto i = s.pattern_begin[p]; i < s.pattern_begin[p + 1]; ++i)
        s.flows[i].max_rate_Bpps = cap_Bpps / out_degree[s.flows[i].src];
    }
  }
}

// Latency: NCCL's baseLat once, and per charged phase the hwLat of its class
// (nccl_step_latency_us), wire included (so the flows' own path latency is not added).
// Ring+Simple all-reduce across nodes pays the plateau factor on both (tuning.cc).
void apply_latency(Fabric& fabric, Op op, double S, const NcclShape& shape,
                   const std::vector<int>& classes, CollectiveSchedule& s) {
  const Algorithm a = s.algorithm;
  const Protocol protocol = s.protocol;
  s.path_latency = false;
  const nccl::Family family = nccl_family(a);
  const double scale = a == Algorithm::RING && nccl_ring_plateau(protocol, op, shape, S)
                           ? nccl::RING_PLATEAU_LATENCY_FACTOR
                           : 1.0;
  s.base_latency = to_sim_time(scale * nccl_base_latency_us(family, protocol, shape) * 1e-6);
  std::vector<int> derived(static_cast<size_t>(s.num_patterns()), -1);
  for (int p = 0; p < s.num_patterns(); ++p) {
    for (auto i = s.pattern_begin[p]; i < s.pattern_begin[p + 1]; ++i) {
      RouteRef r = fabric.route(s.flows[i].src, s.flows[i].dst);
      derived[p] = std::max(derived[p], static_cast<int>(r.latency_class));
    }
  }
  for (size_t i = 0; i < s.phases.size(); ++i) {
    auto& ph = s.phases[i];
    int cls = classes[i] == DERIVED ? derived[static_cast<size_t>(ph.pattern)] : classes[i];
    if (classes[i] == UNCHARGED || cls < 0) {
      ph.overhead = 0;
      continue;
    }
    // NVLSTree's one pipelined step pays NCCL's whole latency past baseLat: intraLat +
    // 2 log2i(nNodes) interLat.
    const double us =
        family == nccl::NVLS_TREE
            ? nccl_latency_us(a, protocol, op, shape, S) -
                  nccl_base_latency_us(family, protocol, shape)
            : nccl_step_latency_us(family, static_cast<LatencyClass>(cls), protocol, shape);
    ph.overhead = to_sim_time(scale * us * 1e-6);
  }
}

}  // namespace

void apply_nccl_costs(Fabric& fabric, const CollectiveRequest& req, Op op, double S,
                      const std::vector<int>& classes, CollectiveSchedule& s) {
  NcclShape shape = nccl_shape(fabric, req.ranks);
  if (s.algorithm == Algorithm::NVLS_TREE) nccl_split_bus_bandwidth(fabric, req.ranks, shape);
  apply_bandwidth(fabric, req, op, S, shape, s);
  apply_latency(fabric, op, S, shape, classes, s);
}

}  // namespace loom::sim
