#pragma once
// Host CPU speeds the GPU catalog and the pass costing share (a tiny header).

namespace loom::topo {

/// CPU seconds per eager op of a GB200's Grace host, TE issue #2053 (a torch Linear forward:
/// 37.08 us): the GB200 and GB300 hosts (GpuSpec::host_op_s), and the speed at which TE issue
/// #2897's routed-expert block, measured on a GB200, is quoted.
inline constexpr double GRACE_HOST_OP_S = 37.08e-6;
/// The same on a DGX H100's Xeon Platinum 8480C: 13.48 us (TE issue #2053).
inline constexpr double XEON_HOST_OP_S = 13.48e-6;

}  // namespace loom::topo
