// The network fit's vocabulary and plumbing (network_fit.hpp): names, applying parameters
// to the engine's options, the clusters a fit runs on, one collective's model time, the rows
// of a profile, coverage and mismatch notes. The fit itself is in network_fit.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "common/error.hpp"
#include "sim/calibration/network_fit.hpp"
#include "sim/calibration/profile.hpp"
#include "sim/engine.hpp"

namespace loom::calibration {

void set_parameter(NetworkParam p, double value, sim::LinkEfficiency& e, sim::NcclTuning& t) {
  switch (p) {
    case NetworkParam::NVLINK_EFFICIENCY:
      e.nvlink = value;
      break;
    case NetworkParam::NIC_EFFICIENCY:
      e.infiniband = e.roce = e.ethernet = value;
      break;
    case NetworkParam::NVLS_EFFICIENCY:
      t.nvls_efficiency = value;
      break;
    case NetworkParam::INTRA_LATENCY_SCALE:
      t.intra_latency_scale = value;
      break;
    case NetworkParam::NET_LATENCY_SCALE:
      t.net_latency_scale = value;
      break;
    case NetworkParam::SIMPLE_LATENCY_SCALE:
      t.simple_latency_scale = value;
      break;
  }
}

std::string to_string(BoundStatus status) {
  switch (status) {
    case BoundStatus::FITTED:
      return "fitted";
    case BoundStatus::AT_LOWER:
      return "at_lower_bound";
    case BoundStatus::AT_UPPER:
      return "at_upper_bound";
    case BoundStatus::PRIOR:
      return "prior";
  }
  return "?";
}

BoundStatus parse_bound_status(const std::string& name, const std::string& field) {
  for (BoundStatus s :
       {BoundStatus::FITTED, BoundStatus::AT_LOWER, BoundStatus::AT_UPPER, BoundStatus::PRIOR})
    if (to_string(s) == name) return s;
  throw ValidationError::unknown_name(field, name,
                                      {"fitted", "at_lower_bound", "at_upper_bound", "prior"});
}

std::string to_string(NetworkParam param) {
  switch (param) {
    case NetworkParam::NVLINK_EFFICIENCY:
      return "nvlink_efficiency";
    case NetworkParam::NIC_EFFICIENCY:
      return "nic_efficiency";
    case NetworkParam::NVLS_EFFICIENCY:
      return "nvls_efficiency";
    case NetworkParam::INTRA_LATENCY_SCALE:
      return "intra_latency_scale";
    case NetworkParam::NET_LATENCY_SCALE:
      return "net_latency_scale";
    case NetworkParam::SIMPLE_LATENCY_SCALE:
      return "simple_latency_scale";
  }
  return "?";
}

std::string to_string(RowRole role) {
  switch (role) {
    case RowRole::BANDWIDTH:
      return "bandwidth";
    case RowRole::LATENCY:
      return "latency";
    case RowRole::MIXED:
      return "mixed";
    case RowRole::OUTLIER:
      return "outlier";
  }
  return "?";
}

const NetworkParameter* FittedNetwork::find(NetworkParam param) const {
  for (const auto& p : parameters)
    if (p.param == param) return &p;
  return nullptr;
}

sim::LinkEfficiency FittedNetwork::link_efficiency() const {
  sim::LinkEfficiency e;
  sim::NcclTuning t;
  for (const auto& p : parameters) set_parameter(p.param, p.value, e, t);
  return e;
}

sim::NcclTuning FittedNetwork::nccl_tuning() const {
  sim::LinkEfficiency e;
  sim::NcclTuning t;
  for (const auto& p : parameters) set_parameter(p.param, p.value, e, t);
  return t;
}

const topo::Cluster& ClusterCache::of(int nodes) {
  for (const auto& [n, c] : built_)
    if (n == nodes) return *c;
  built_.emplace_back(nodes, std::make_unique<topo::Cluster>(factory_(nodes)));
  built_.back().second->finalize();
  return *built_.back().second;
}

std::string fabric_signature(const topo::Cluster& cluster) {
  std::set<std::pair<std::string, double>> kinds;
  for (const auto& l : cluster.links()) {
    if (l.kind == topo::LinkKind::NVLINK || l.kind == topo::LinkKind::INFINIBAND ||
        l.kind == topo::LinkKind::ROCE || l.kind == topo::LinkKind::ETHERNET)
      kinds.emplace(topo::to_string(l.kind), std::round(l.bandwidth_Bps / 1e8) / 10);
  }
  std::string out;
  for (const auto& [kind, gbps] : kinds)
    out += fmt::format("{}{} {:g} GB/s", out.empty() ? "" : "; ", kind, gbps);
  return out.empty() ? "no NVLink or NIC links" : out;
}

double model_seconds(const topo::Cluster& cluster, const NetworkObservation& row,
                     const sim::LinkEfficiency& efficiency, const sim::NcclTuning& tuning,
                     sim::NetworkMode mode) {
  const int per_node = row.nodes > 0 ? row.group_size / row.nodes : 0;
  if (row.nodes < 1 || per_node * row.nodes != row.group_size ||
      per_node > cluster.gpus_per_node() || row.nodes > cluster.num_nodes()) {
    throw ValidationError(
        "--cluster",
        fmt::format("--cluster: {} ranks over {} node(s) ({}) do not fit {} ({} GPUs "
                    "per node, {} nodes); give the --cluster the logs were measured on",
                    row.group_size, row.nodes, row.source, cluster.name, cluster.gpus_per_node(),
                    cluster.num_nodes()));
  }
  sim::EngineOptions options;
  options.network = mode;
  options.link_efficiency = efficiency;
  options.nccl_tuning = tuning;
  sim::Engine engine(cluster, options);
  sim::CollectiveSpec spec;
  spec.request.op = row.op;
  for (int n = 0; n < row.nodes; ++n)
    for (int l = 0; l < per_node; ++l)
      spec.request.ranks.push_back(n * cluster.gpus_per_node() + l);
  spec.request.bytes = row.bytes;
  spec.request.algorithm = row.algorithm;
  const sim::TaskId task = engine.add_collective(spec);
  engine.run();
  return sim::to_seconds(engine.finish(task));
}

std::vector<NetworkObservation> observations_of(const Profile& profile) {
  std::vector<NetworkObservation> rows;
  for (const CollectiveTable& t : profile.collectives) {
    // NCCL_ALGO=Ring etc.: the measurement is of that algorithm, so the fit runs the model's
    // own path for it (NCCL's tuner still picks the protocol); a list of algorithms leaves
    // the tuner's choice among them, which loom approximates by its full choice (auto).
    std::string algo;
    for (char c : t.forced_algo)
      algo += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const sim::Algorithm forced = algo == "ring"       ? sim::Algorithm::RING
                                  : algo == "tree"     ? sim::Algorithm::TREE
                                  : algo == "nvls"     ? sim::Algorithm::NVLS
                                  : algo == "nvlstree" ? sim::Algorithm::NVLS_TREE
                                                       : sim::Algorithm::AUTO;
    for (const CollectivePoint& p : t.points) {
      NetworkObservation o;
      o.algorithm = forced;
      o.weight = p.weight;
      o.op = t.op;
      o.group_size = t.group_size;
      o.nodes = t.nodes;
      o.bytes = p.bytes;
      o.seconds = p.seconds;
      o.gpu = t.gpu;
      // The point's own file ("file:27" or "file:27+61"): tables of one shape from several
      // logs are merged, and each log is its own leave-one-out unit.
      const size_t colon = p.source.rfind(':');
      o.log = colon == std::string::npos || colon == 0 ? t.source : p.source.substr(0, colon);
      o.source = p.source;
      rows.push_back(o);
    }
  }
  return rows;
}

Coverage coverage(const FittedNetwork& network, int nodes) {
  auto fitted = [&](NetworkParam p) {
    const NetworkParameter* q = network.find(p);
    return q && q->status != BoundStatus::PRIOR;
  };
  if (nodes > 1) {
    if (fitted(NetworkParam::NIC_EFFICIENCY)) return {true, "nic_efficiency fitted"};
    return {false, "nic_efficiency at its default: no row of the profile is NIC-bound"};
  }
  const bool nvlink = fitted(NetworkParam::NVLINK_EFFICIENCY);
  const bool nvls = fitted(NetworkParam::NVLS_EFFICIENCY);
  if (nvlink || nvls) {
    return {true, nvlink && nvls ? "nvlink_efficiency and nvls_efficiency fitted"
                  : nvls         ? "nvls_efficiency fitted"
                                 : "nvlink_efficiency fitted"};
  }
  return {false,
          "nvlink_efficiency and nvls_efficiency at their defaults: no row of the "
          "profile is bound by NVLink inside a node"};
}

std::vector<std::string> mismatch_notes(const FittedNetwork& network,
                                        const topo::Cluster& cluster) {
  std::vector<std::string> notes;
  if (!network.gpu.empty() && network.gpu != cluster.gpu.name) {
    notes.push_back(fmt::format("the network was fitted on {} GPUs ({}), the cluster has {}",
                                network.gpu, network.measured_gpu, cluster.gpu.name));
  }
  // Every link kind of the cluster must appear in the fitted fabric at the same rate; kinds
  // the cluster lacks (a single node's NICs) do not matter.
  const std::string fabric = fabric_signature(cluster);
  bool same = true;
  size_t begin = 0;
  while (begin < fabric.size()) {
    size_t end = fabric.find("; ", begin);
    if (end == std::string::npos) end = fabric.size();
    const std::string entry = fabric.substr(begin, end - begin);
    const std::string theirs = "; " + network.fabric + "; ";
    same = same && theirs.find("; " + entry + "; ") != std::string::npos;
    begin = end + 2;
  }
  if (!network.fabric.empty() && !same) {
    notes.push_back(fmt::format("the network was fitted on links [{}], the cluster has [{}]",
                                network.fabric, fabric));
  }
  return notes;
}

}  // namespace loom::calibration
