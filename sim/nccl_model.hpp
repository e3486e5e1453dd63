#pragma once
// NCCL's tuner model (ncclTopoTuneModel + ncclTopoGetAlgoTime, NVIDIA/nccl v2.30.7-1
// src/graph/tuning.cc), closed form: the predicted time of an algorithm/protocol pair is
// latency + bytes / algorithm bandwidth. loom uses it (1) to pick the algorithm and protocol
// of `auto` exactly as NCCL's tuner does, and (2) to derive the protocol bandwidth factors
// and caps it applies to the simulated flows. The formulas are restated beside each
// function; the constants are in nccl_constants.hpp.
#include <limits>
#include <vector>

#include "sim/collectives.hpp"
#include "sim/fabric.hpp"
#include "sim/nccl_constants.hpp"

namespace loom::sim {

/// What NCCL's tuner knows of a communicator.
struct NcclShape {
  int ranks = 1;  ///< nRanks
  int nodes = 1;  ///< nNodes
  nccl::Arch arch = nccl::AMPERE;
  int channels = 2;               ///< nChannels (loom's assumption, see nccl_channels())
  double bus_bandwidth_GBps = 0;  ///< nChannels * bw: the topology's per-rank bus bandwidth
  LatencyClass intra = LatencyClass::NVLINK;  ///< class of an intra-node step (NVLINK or PCI)
  /// NCCL's nChannels x bwIntra and x bwInter for NVLSTree, GB/s: each rank's send rate in
  /// one uncontended step of loom's rings counting only the hops inside nodes, or only those
  /// between nodes (nccl_split_bus_bandwidth; 0 until measured).
  double intra_bus_GBps = 0;
  double inter_bus_GBps = 0;
  /// Calibrated scales of NCCL's constants (the fabric's; defaults: NCCL's values).
  NcclTuning tuning = {};

  /// Ranks per node (nRanks / nNodes, at least 1).
  int ranks_per_node() const { return nodes > 0 && ranks >= nodes ? ranks / nodes : 1; }
  /// Column of llMaxBws / perChMax*Bws: 0 one node, 1 two nodes, 2 more.
  int node_column() const { return nodes <= 1 ? 0 : nodes == 2 ? 1 : 2; }
};

/// A protocol's bus bandwidth after NCCL's refinements: busBw = min(factor x raw, cap).
struct NcclBandwidth {
  double factor = 1.0;                                        ///< multiplies the raw busBw
  double cap_GBps = std::numeric_limits<double>::infinity();  ///< absolute ceiling, GB/s
  /// The refined bus bandwidth of a raw one, GB/s.
  double bus_GBps(double raw_GBps) const {
    return raw_GBps * factor < cap_GBps ? raw_GBps * factor : cap_GBps;
  }
};

/// NCCL's architecture row for a GPU, from its spec's architecture (Blackwell, Hopper, Volta
/// their own rows; Ampere, Ada and AMD GPUs the Ampere row).
nccl::Arch nccl_arch(const topo::GpuSpec& gpu);
/// loom's assumption for nChannels, which NCCL's topology search sets: two channels per
/// NVLink of a GPU, at most MAXCHANNELS (32); 2 without NVLink.
int nccl_channels(const topo::GpuSpec& gpu);

/// NCCL's view of a group on a fabric: ranks, nodes, architecture and channels of the
/// cluster's GPU, the intra-node latency class, and the raw bus bandwidth (each rank's send
/// rate in one uncontended step of loom's ring over the group). Defined in collectives.cpp,
/// beside the rings it measures. Throws ValidationError on a rank outside the cluster.
NcclShape nccl_shape(Fabric& fabric, const std::vector<int>& ranks);
/// Fills shape.intra_bus_GBps and inter_bus_GBps (see NcclShape) for a group spanning
/// nodes; NVLSTree's model needs them, so it is measured only when that is a candidate.
void nccl_split_bus_bandwidth(Fabric& fabric, const std::vector<int>& ranks, NcclShape& shape);

/// Whether NCCL's model covers the pair (ring: all_reduce, all_gather, reduce_scatter,
/// broadcast, reduce; tree: all_reduce; nvls and nvls_tree: all_reduce, Simple only; NCCL
/// runs broadcast and reduce only as rings).
bool nccl_models(Algorithm algorithm, Protocol protocol, CollectiveOp op);
/// Bus bandwidth refinements (tuning.cc ncclTopoTuneModel): Ring+LL min(llMaxBw, 0.5 busBw);
/// Ring+LL128 min(0.92 busBw, nCh perChMaxRingLL128Bw); Tree all-reduce min(0.92 busBw, nCh
/// perChMaxTreeBw), then Tree+LL min(busBw / 3.8, llMaxBw), Tree+LL128 min(busBw x (7/9 on
/// one node, else 120/128), nCh perChMaxTreeLL128Bw); NVLS 2 x nvlsEfficiency x (nCh-1)/nCh
/// for all-reduce; NVLSTree min(2 x nvlsEfficiency x (nCh-1)/nCh x intra, inter x (2 over
/// <= 2 nodes, else 1), nCh perChMaxNVLSTreeBw), applied to shape.intra_bus_GBps. Other
/// algorithms take the Ring rows.
NcclBandwidth nccl_bus_bandwidth(Algorithm algorithm, Protocol protocol, CollectiveOp op,
                                 const NcclShape& shape);
/// The latency-row family of an algorithm: Tree, NVLS, or Ring (ring, and the algorithms
/// NCCL does not have, which take the Ring rows).
nccl::Family nccl_family(Algorithm algorithm);
/// hwLat of one step over a route of class `cls`, microseconds: Tree and NVLS take their
/// row as it is; a Ring step across nodes takes the Tree NET row when there is one rank per
/// node, and a Ring step inside a node costs at least netOverhead (x3 for Simple) when the
/// group spans nodes (tuning.cc).
double nccl_step_latency_us(nccl::Family family, LatencyClass cls, Protocol protocol,
                            const NcclShape& shape);
/// Whether Ring+Simple all-reduce pays the plateau factor (x1.4 latency): across nodes, once
/// bytes / (nChannels nRanks) >= 64 (tuning.cc ncclTopoGetAlgoTime).
bool nccl_ring_plateau(Protocol protocol, CollectiveOp op, const NcclShape& shape, double bytes);
/// baseLat[family][protocol] x the tuning's intra-node latency scale, microseconds.
double nccl_base_latency_us(nccl::Family family, Protocol protocol, const NcclShape& shape);
/// NVLS bandwidth factor: nvlsEfficiency of the architecture x (nChannels - 1) / nChannels.
double nccl_nvls_factor(const NcclShape& shape);
/// NVLSTree's share of treeCorrectionFactor: applied on Blackwell (NCCL: compute capability
/// >= 10 on x86 hosts; loom assumes x86), 1 otherwise.
double nccl_nvls_tree_correction(const NcclShape& shape, Protocol protocol, double bytes);
/// treeCorrectionFactor[protocol][log2(bytes / 64)] (1 above 512 MiB).
double nccl_tree_correction(Protocol protocol, double bytes);
/// Latency in microseconds (tuning.cc): Ring base + (nsteps - nInterSteps) x max(intraLat,
/// netOverhead) + nInterSteps x interLat; Tree all-reduce base + 2((nRanks/nNodes - 1)
/// intraLat + log2(nNodes) interLat); NVLS intraLat (+ interLat across nodes); NVLSTree
/// intraLat + 2 log2i(nNodes) interLat; Ring+Simple
/// all-reduce across nodes x 1.4 once bytes / (nChannels nRanks) >= 64.
double nccl_latency_us(Algorithm algorithm, Protocol protocol, CollectiveOp op,
                       const NcclShape& shape, double bytes);
/// Algorithm bandwidth in GB/s: Ring/NVLS busBw x nRanks / nsteps (nsteps 2(n-1) all-reduce,
/// n-1 all-gather/reduce-scatter, n otherwise); Tree all-reduce busBw x 0.5; times the tree
/// correction factor for Tree, and for NVLSTree on Blackwell (NCCL: x86 hosts only).
double nccl_algorithm_bandwidth_GBps(Algorithm algorithm, Protocol protocol, CollectiveOp op,
                                     const NcclShape& shape, double bytes);
/// NCCL's predicted time in microseconds, latency + bytes / (1000 x algBw); negative when
/// NCCL's model does not cover the pair.
double nccl_time_us(Algorithm algorithm, Protocol protocol, CollectiveOp op, const NcclShape& shape,
                    double bytes);

}  // namespace loom::sim
