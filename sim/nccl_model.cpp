#include "sim/nccl_model.hpp"

#include <algorithm>
#include <cmath>

namespace loom::sim {

namespace {

using Op = CollectiveOp;

std::size_t proto_index(Protocol p) {
  return static_cast<std::size_t>(p);
}

// hwLat of a class, scaled by the fabric's calibrated latency scale of that class.
double hw_latency_us(LatencyClass cls, nccl::Family family, Protocol p, const NcclTuning& t) {
  const double scale = (cls == LatencyClass::NET ? t.net_latency_scale : t.intra_latency_scale) *
                       (p == Protocol::SIMPLE ? t.simple_latency_scale : 1.0);
  return scale * nccl::HW_LATENCY_US[static_cast<std::size_t>(cls)]
                                    [static_cast<std::size_t>(family)][proto_index(p)];
}

// nsteps of the busBw -> algBw conversion (tuning.cc ncclTopoTuneModel).
int algbw_steps(Op op, int n) {
  if (op == Op::ALL_REDUCE) return 2 * (n - 1);
  if (op == Op::ALL_GATHER || op == Op::REDUCE_SCATTER) return n - 1;
  return n;
}

}  // namespace

nccl::Arch nccl_arch(const topo::GpuSpec& gpu) {
  // NCCL picks its row by the lowest compute capability (tuning.cc: >= 10.0 Blackwell,
  // >= 9.0 Hopper, >= 8.0 Ampere, else Volta): Ada (8.9) reads the Ampere row. RCCL's own
  // tables are not modelled; AMD GPUs keep the Ampere row.
  switch (gpu.arch) {
    case topo::GpuArch::VOLTA:
      return nccl::VOLTA;
    case topo::GpuArch::HOPPER:
      return nccl::HOPPER;
    case topo::GpuArch::BLACKWELL:
      return nccl::BLACKWELL;
    case topo::GpuArch::AMPERE:
    case topo::GpuArch::ADA:
    case topo::GpuArch::CDNA3:
      return nccl::AMPERE;
  }
  return nccl::AMPERE;
}

int nccl_channels(const topo::GpuSpec& gpu) {
  if (gpu.nvlink_bandwidth_Bps <= 0) return 2;
  // NVLink 3 and 4 links carry 25 GB/s per direction, NVLink 5 links 50 GB/s.
  const double per_link = gpu.nvlink_generation >= 5 ? 50e9 : 25e9;
  const int links = std::max(1, static_cast<int>(std::lround(gpu.nvlink_bandwidth_Bps / per_link)));
  return std::clamp(2 * links, 2, nccl::MAX_CHANNELS);
}

bool nccl_models(Algorithm a, Protocol p, Op op) {
  switch (a) {
    case Algorithm::RING:
      return op == Op::ALL_REDUCE || op == Op::ALL_GATHER || op == Op::REDUCE_SCATTER ||
             op == Op::BROADCAST || op == Op::REDUCE || op == Op::BARRIER;
    case Algorithm::TREE:
      return op == Op::ALL_REDUCE || op == Op::BARRIER;
    case Algorithm::NVLS:
    case Algorithm::NVLS_TREE:
      return (op == Op::ALL_REDUCE || op == Op::BARRIER) && p == Protocol::SIMPLE;
    default:
      return false;
  }
}

NcclBandwidth nccl_bus_bandwidth(Algorithm a, Protocol p, Op op, const NcclShape& shape) {
  NcclBandwidth bw;
  const auto arch = static_cast<std::size_t>(shape.arch);
  const auto col = static_cast<std::size_t>(shape.node_column());
  const double channels = shape.channels;
  const double ll_max = nccl::LL_MAX_BW_GBPS[arch][col];
  auto scale = [&](double f) {
    bw.factor *= f;
    bw.cap_GBps *= f;
  };
  auto cap = [&](double c) { bw.cap_GBps = std::min(bw.cap_GBps, c); };
  if (a == Algorithm::NVLS) {
    scale(nccl_nvls_factor(shape));
    if (op == Op::ALL_REDUCE || op == Op::BARRIER) scale(2.0);
    return bw;
  }
  if (a == Algorithm::NVLS_TREE) {
    // Per channel min(intraBw, interBw, perChMaxNVLSTreeBw) x nChannels (NCCL's NVLS graph
    // has NVLS_CHANNELS): the min commutes with the common nChannels factor.
    scale(2.0 * nccl_nvls_factor(shape));
    cap(shape.inter_bus_GBps * (shape.nodes <= 2 ? 2.0 : 1.0));
    cap(nccl::NVLS_CHANNELS * nccl::PER_CH_MAX_NVLS_TREE_BW_GBPS[arch][col]);
    return bw;
  }
  if (a == Algorithm::TREE) {
    if (op == Op::ALL_REDUCE || op == Op::BARRIER) {
      scale(nccl::TREE_ALLREDUCE_FACTOR);
      cap(channels * nccl::PER_CH_MAX_TREE_BW_GBPS[arch][col]);
    }
    if (p == Protocol::LL) {
      scale(1.0 / nccl::TREE_LL_DIVISOR);
      cap(ll_max);
    } else if (p == Protocol::LL128) {
      scale(shape.nodes <= 1 ? nccl::TREE_LL128_FACTOR_ONE_NODE : nccl::TREE_LL128_FACTOR_NODES);
      cap(channels * nccl::PER_CH_MAX_TREE_LL128_BW_GBPS[arch][col]);
    }
    return bw;
  }
  // Ring, and the algorithms NCCL does not have, which take the Ring rows.
  if (p == Protocol::LL) {
    scale(nccl::RING_LL_FACTOR);
    cap(ll_max);
  } else if (p == Protocol::LL128) {
    scale(nccl::LL128_FACTOR);
    cap(channels * nccl::PER_CH_MAX_RING_LL128_BW_GBPS[arch][col]);
  }
  return bw;
}

double nccl_tree_correction(Protocol p, double bytes) {
  if (!(bytes < 1073741824.0)) return 1.0;  // past the table (and no overflow below)
  // log2i(nBytes >> 6): the index of the highest set bit (0 for 0).
  auto chunks = static_cast<std::uint64_t>(std::max(0.0, bytes)) >> 6;
  int log = 0;
  while (chunks >>= 1) ++log;
  const auto& row = nccl::TREE_CORRECTION[proto_index(p)];
  return log < static_cast<int>(row.size()) ? row[static_cast<std::size_t>(log)] : 1.0;
}

nccl::Family nccl_family(Algorithm a) {
  if (a == Algorithm::TREE) return nccl::TREE;
  if (a == Algorithm::NVLS) return nccl::NVLS;
  if (a == Algorithm::NVLS_TREE) return nccl::NVLS_TREE;
  return nccl::RING;
}

double nccl_step_latency_us(nccl::Family family, LatencyClass cls, Protocol p,
                            const NcclShape& shape) {
  if (family != nccl::RING) return hw_latency_us(cls, family, p, shape.tuning);
  // interLat takes the Tree row when there is one rank per node (tuning.cc).
  if (cls == LatencyClass::NET)
    return hw_latency_us(cls, shape.ranks_per_node() == 1 ? nccl::TREE : nccl::RING, p,
                         shape.tuning);
  double us = hw_latency_us(cls, nccl::RING, p, shape.tuning);
  if (shape.nodes > 1) {
    us = std::max(us, nccl::NET_OVERHEAD_US *
                          (p == Protocol::SIMPLE ? nccl::NET_OVERHEAD_SIMPLE_MULTIPLIER : 1.0));
  }
  return us;
}

double nccl_nvls_tree_correction(const NcclShape& shape, Protocol p, double bytes) {
  // ncclTuningNvlsModelSim: the tree correction factor for NVLSTree all-reduce on
  // compute capability >= 10 with x86 hosts; loom assumes an x86 host (netOverhead above).
  return shape.arch == nccl::BLACKWELL ? nccl_tree_correction(p, bytes) : 1.0;
}

double nccl_base_latency_us(nccl::Family family, Protocol p, const NcclShape& shape) {
  return shape.tuning.intra_latency_scale *
         (p == Protocol::SIMPLE ? shape.tuning.simple_latency_scale : 1.0) *
         nccl::BASE_LATENCY_US[family][proto_index(p)];
}

double nccl_nvls_factor(const NcclShape& shape) {
  const double eff = shape.tuning.nvls_efficiency > 0 ? shape.tuning.nvls_efficiency
                     : shape.arch == nccl::BLACKWELL  ? nccl::NVLS_EFFICIENCY_BLACKWELL
                                                      : nccl::NVLS_EFFICIENCY_HOPPER;
  return eff * (nccl::NVLS_CHANNELS - 1) / nccl::NVLS_CHANNELS;
}

bool nccl_ring_plateau(Protocol p, Op op, const NcclShape& shape, double bytes) {
  return p == Protocol::SIMPLE && shape.nodes > 1 && (op == Op::ALL_REDUCE || op == Op::BARRIER) &&
         bytes / (static_cast<double>(shape.channels) * shape.ranks) >= 64;
}

double nccl_latency_us(Algorithm a, Protocol p, Op op, const NcclShape& shape, double bytes) {
  const int n = shape.ranks, nodes = std::max(1, shape.nodes);
  const nccl::Family family = nccl_family(a);
  if (family == nccl::NVLS) {
    double lat = nccl_step_latency_us(family, LatencyClass::NVLINK, p, shape);
    if (nodes > 1) lat += nccl_step_latency_us(family, LatencyClass::NET, p, shape);
    return lat;
  }
  if (family == nccl::NVLS_TREE) {
    // log2i: NCCL's integer log2 (floor).
    return nccl_base_latency_us(family, p, shape) +
           nccl_step_latency_us(family, LatencyClass::NVLINK, p, shape) +
           2 * std::floor(std::log2(static_cast<double>(nodes))) *
               nccl_step_latency_us(family, LatencyClass::NET, p, shape);
  }
  const double intra = nccl_step_latency_us(family, shape.intra, p, shape);
  const double inter = nccl_step_latency_us(family, LatencyClass::NET, p, shape);
  if (family == nccl::TREE) {
    return nccl_base_latency_us(nccl::TREE, p, shape) +
           2 * ((shape.ranks_per_node() - 1) * intra +
                std::log2(static_cast<double>(nodes)) * inter);
  }
  // Ring. Broadcast and reduce run as a chain of n - 1 hops, nNodes - 1 of them between
  // nodes (loom's reading; NCCL's own nsteps there is n).
  const bool ar = op == Op::ALL_REDUCE || op == Op::BARRIER;
  const int steps = ar ? 2 * (n - 1) : n - 1;
  const int inter_steps = ar ? 2 * (nodes - 1) : nodes - 1;
  double lat = nccl_base_latency_us(nccl::RING, p, shape) + (steps - inter_steps) * intra +
               inter_steps * inter;
  if (nccl_ring_plateau(p, op, shape, bytes)) lat *= nccl::RING_PLATEAU_LATENCY_FACTOR;
  return lat;
}

double nccl_algorithm_bandwidth_GBps(Algorithm a, Protocol p, Op op, const NcclShape& shape,
                                     double bytes) {
  const double raw = a == Algorithm::NVLS_TREE ? shape.intra_bus_GBps : shape.bus_bandwidth_GBps;
  const double bus = nccl_bus_bandwidth(a, p, op, shape).bus_GBps(raw);
  if (a == Algorithm::TREE) return bus * 0.5 * nccl_tree_correction(p, bytes);
  const int n = shape.ranks;
  const double alg = bus * n / std::max(1, algbw_steps(op == Op::BARRIER ? Op::ALL_REDUCE : op, n));
  return a == Algorithm::NVLS_TREE ? alg * nccl_nvls_tree_correction(shape, p, bytes) : alg;
}

double nccl_time_us(Algorithm a, Protocol p, Op op, const NcclShape& shape, double bytes) {
  if (!nccl_models(a, p, op) || shape.ranks < 2) return -1;
  const double bw = nccl_algorithm_bandwidth_GBps(a, p, op, shape, bytes);
  if (!(bw > 0)) return -1;
  return nccl_latency_us(a, p, op, shape, bytes) + bytes / (1000 * bw);
}

}  // namespace loom::sim
