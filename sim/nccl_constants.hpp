#pragma once
// NCCL's cost-model constants, copied from NVIDIA/nccl tag v2.30.7-1 (commit 73cf1122),
// src/graph/tuning.cc (baseLat, hwLat, llMaxBws, perChMax*Bws, nvlsEfficiency,
// treeCorrectionFactor, the refinements of ncclTopoTuneModel) and src/graph/topo.h.
// Indexed [protocol] with protocols in the order LL, LL128, Simple.
// loom never reads NCCL or the reference data at run time; these are the numbers.
#include <array>

namespace loom::sim::nccl {

inline constexpr const char* RELEASE = "v2.30.7-1";

/// Algorithm families whose latency rows loom uses (NVLS_TREE: NCCL's NVLSTree, NVLink
/// SHARP inside each node and a double binary tree between the nodes).
enum Family { RING = 0, TREE = 1, NVLS = 2, NVLS_TREE = 3 };

/// GPU architecture rows of llMaxBws / perChMax*Bws (tuning.cc: Volta, Ampere, Hopper,
/// Blackwell).
enum Arch { VOLTA = 0, AMPERE = 1, HOPPER = 2, BLACKWELL = 3 };

/// baseLat[algorithm][protocol], microseconds (tuning.cc, v2.30.7-1).
inline constexpr std::array<std::array<double, 3>, 4> BASE_LATENCY_US = {{
    {6.6, 14.0, 8.4},  // Ring
    {6.8, 14.0, 8.4},  // Tree
    {0.0, 0.0, 0.0},   // NVLS
    {0.0, 0.0, 0.0},   // NVLSTree
}};

/// hwLat[NVLINK | PCI | NET][algorithm][protocol], microseconds per step (tuning.cc).
inline constexpr std::array<std::array<std::array<double, 3>, 4>, 3> HW_LATENCY_US = {{
    // NVLINK: Ring, Tree, NVLS, NVLSTree
    {{{0.6, 1.9, 3.4}, {0.6, 1.25, 4.0}, {0.0, 0.0, 25.0}, {0.0, 0.0, 25.0}}},
    {{{1.0, 2.5, 5.7}, {1.0, 1.9, 4.0}, {0.0, 0.0, 0.0}, {0.0, 0.0, 0.0}}},      // PCI
    {{{2.7, 4.0, 14.0}, {5.0, 8.5, 14.0}, {0.0, 0.0, 18.0}, {0.0, 0.0, 20.9}}},  // NET
}};

/// llMaxBws[arch][nNodes 1 | 2 | >2], GB/s: the LL protocol's bus-bandwidth ceiling
/// (tuning.cc; rows Volta, Ampere, Hopper, Blackwell).
inline constexpr std::array<std::array<double, 3>, 4> LL_MAX_BW_GBPS = {{
    {39.0, 39.0, 20.4},
    {87.7, 22.5, 19.0},
    {141.0, 45.0, 35.0},
    {282.0, 90.0, 70.0},
}};
/// perChMaxRingLL128Bws[arch][nodes column], GB/s per channel (tuning.cc).
inline constexpr std::array<std::array<double, 3>, 4> PER_CH_MAX_RING_LL128_BW_GBPS = {{
    {20.0, 20.0, 20.0},
    {20.0, 20.0, 20.0},
    {36.7, 36.7, 36.7},
    {40.0, 40.0, 40.0},
}};
/// perChMaxTreeLL128Bws[arch][nodes column], GB/s per channel (tuning.cc).
inline constexpr std::array<std::array<double, 3>, 4> PER_CH_MAX_TREE_LL128_BW_GBPS = {{
    {20.0, 20.0, 20.0},
    {20.0, 20.0, 20.0},
    {36.7, 36.7, 29.0},
    {55.6, 31.67, 20.0},
}};
/// perChMaxTreeBws[arch][nodes column], GB/s per channel (tuning.cc).
inline constexpr std::array<std::array<double, 3>, 4> PER_CH_MAX_TREE_BW_GBPS = {{
    {26.5, 18.5, 10.0},
    {24.0, 23.6, 17.8},
    {38.7, 41.4, 36.0},
    {70.0, 42.8, 24.0},
}};
/// perChMaxNVLSTreeBws[arch][nodes column], GB/s per channel: NVLSTree's ceiling (tuning.cc;
/// the one-node column is unused, NVLSTree needs two nodes).
inline constexpr std::array<std::array<double, 3>, 4> PER_CH_MAX_NVLS_TREE_BW_GBPS = {{
    {26.5, 18.5, 10.0},
    {24.0, 23.6, 17.8},
    {0.0, 57.7, 45.5},
    {0.0, 96.0, 80.0},
}};

/// Ring+LL: LL carries 4 bytes of data per 8-byte store (ncclTopoTuneModel: busBw * 0.5).
inline constexpr double RING_LL_FACTOR = 0.5;
/// Ring+LL128 (120 of 128 bytes carry data) and Tree all-reduce bandwidth factor
/// (ncclTopoTuneModel: busBw * 0.92).
inline constexpr double LL128_FACTOR = 0.92;
inline constexpr double TREE_ALLREDUCE_FACTOR = 0.92;
/// Tree+LL: busBw / 3.8 (ncclTopoTuneModel).
inline constexpr double TREE_LL_DIVISOR = 3.8;
/// Tree+LL128: busBw * 7/9 on one node, * 120/128 across nodes (ncclTopoTuneModel).
inline constexpr double TREE_LL128_FACTOR_ONE_NODE = 7.0 / 9.0;
inline constexpr double TREE_LL128_FACTOR_NODES = 120.0 / 128.0;

/// treeCorrectionFactor[protocol][log2(nBytes / 64)] for sizes 64 B .. 512 MiB; 1 beyond
/// (tuning.cc ncclTopoGetAlgoTime: "Trees are not perfectly sticking to the model for
/// medium sizes").
inline constexpr std::array<std::array<double, 24>, 3> TREE_CORRECTION = {{
    {1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.7, 0.7, 0.7, 0.7, 0.6, 0.5,
     0.4, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.8, 0.8, 0.7, 0.6, 0.6,
     0.6, 0.6, 0.6, 0.6, 0.8, 0.9, 0.9, 0.9, 0.9, 1.0, 1.0, 1.0},
    {0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.7, 0.6, 0.6, 0.5,
     0.5, 0.5, 0.5, 0.6, 0.7, 0.8, 0.7, 0.7, 0.8, 0.9, 0.9, 0.9},
}};

/// Ring latency across nodes: each intra-node step costs at least netOverhead, 1 us on
/// Intel/ARM hosts (2 us AMD), x3 for Simple (ncclTopoTuneModel). loom assumes Intel/ARM.
inline constexpr double NET_OVERHEAD_US = 1.0;
inline constexpr double NET_OVERHEAD_SIMPLE_MULTIPLIER = 3.0;
/// Ring+Simple all-reduce across nodes, nBytes / (nChannels * nRanks) >= 64: latency x 1.4
/// on Ampere and later ("plateau effect of ring", ncclTopoGetAlgoTime).
inline constexpr double RING_PLATEAU_LATENCY_FACTOR = 1.4;

/// nvlsEfficiency for Hopper (compute capability 9.x): the NVLink SHARP reduction's
/// achievable fraction of the NVLink bandwidth (tuning.cc, v2.30.7-1).
inline constexpr double NVLS_EFFICIENCY_HOPPER = 0.85;
/// nvlsEfficiency for Blackwell (compute capability 10.x) (tuning.cc, v2.30.7-1).
inline constexpr double NVLS_EFFICIENCY_BLACKWELL = 0.74;
/// NVLS channels (NCCL_NVLS_NCHANNELS default); the tuner scales NVLS bandwidth by
/// (nCh - 1) / nCh because one channel's worth of bandwidth is not usable.
inline constexpr int NVLS_CHANNELS = 16;

/// MAXCHANNELS (src/include/device.h): the most collective channels a communicator uses.
inline constexpr int MAX_CHANNELS = 32;

}  // namespace loom::sim::nccl
