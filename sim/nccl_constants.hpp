#pragma once
// NCCL's cost-model constants, copied from NVIDIA/nccl tag v2.30.7-1 (commit 73cf1122),
// src/graph/tuning.cc (baseLat, hwLat, nvlsEfficiency, protocol refinements) and
// src/graph/topo.h. Indexed [protocol] with protocols in the order LL, LL128, Simple.
// loom never reads NCCL or the reference data at run time; these are the numbers.
#include <array>

namespace loom::sim::nccl {

inline constexpr const char* RELEASE = "v2.30.7-1";

/// Algorithm families whose latency rows loom uses.
enum Family { RING = 0, TREE = 1, NVLS = 2 };

/// baseLat[algorithm][protocol], microseconds (tuning.cc, v2.30.7-1).
inline constexpr std::array<std::array<double, 3>, 3> BASE_LATENCY_US = {{
    {6.6, 14.0, 8.4},  // Ring
    {6.8, 14.0, 8.4},  // Tree
    {0.0, 0.0, 0.0},   // NVLS
}};

/// hwLat[NVLINK | PCI | NET][algorithm][protocol], microseconds per step (tuning.cc).
inline constexpr std::array<std::array<std::array<double, 3>, 3>, 3> HW_LATENCY_US = {{
    {{{0.6, 1.9, 3.4}, {0.6, 1.25, 4.0}, {0.0, 0.0, 25.0}}},   // NVLINK: Ring, Tree, NVLS
    {{{1.0, 2.5, 5.7}, {1.0, 1.9, 4.0}, {0.0, 0.0, 0.0}}},     // PCI
    {{{2.7, 4.0, 14.0}, {5.0, 8.5, 14.0}, {0.0, 0.0, 18.0}}},  // NET
}};

/// Payload efficiency per protocol, from ncclTopoTuneModel's refinements: LL carries 4
/// bytes of data per 8-byte store (busBw * 0.5); LL128 carries 120 of 128 bytes, which the
/// tuner models as busBw * 0.92; Simple carries full payload.
inline constexpr std::array<double, 3> PROTOCOL_EFFICIENCY = {0.5, 0.92, 1.0};

/// nvlsEfficiency for Hopper (compute capability 9.x): the NVLink SHARP reduction's
/// achievable fraction of the NVLink bandwidth (tuning.cc, v2.30.7-1).
inline constexpr double NVLS_EFFICIENCY_HOPPER = 0.85;
/// NVLS channels (NCCL_NVLS_NCHANNELS default); the tuner scales NVLS bandwidth by
/// (nCh - 1) / nCh because one channel's worth of bandwidth is not usable.
inline constexpr int NVLS_CHANNELS = 16;

}  // namespace loom::sim::nccl
