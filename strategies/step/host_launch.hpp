#pragma once
// The default host time per eager kernel launch, shared by the step options and the pass
// costing (a tiny header: step_simulator.hpp is widely included).

#include "topologies/host_speed.hpp"

namespace loom::strategies {

/// The host seconds per eager kernel launch loom assumes for a GPU whose host was not measured
/// (GpuSpec::host_op_s 0; SimulateOptions::host_launch_s, --host-launch, overrides both):
/// Python, the ATen dispatcher and cudaLaunchKernel, 5-25 us per op (docs/defaults.md).
inline constexpr double REFERENCE_HOST_LAUNCH_S = 10e-6;

/// The host seconds per eager op of the system TE issue #2897 measured its routed-expert block
/// on (a GB200's Grace): the block's host time scales from it to the host that runs the plan
/// (pass_cost expert_block_host_s).
using topo::GRACE_HOST_OP_S;

/// The host seconds per eager launch a run takes: the option (--host-launch) when given
/// (>= 0), else the GPU's host (GpuSpec::host_op_s) when known (> 0), else the reference.
inline double host_launch_for(double option_s, double gpu_host_op_s) {
  if (option_s >= 0) return option_s;
  return gpu_host_op_s > 0 ? gpu_host_op_s : REFERENCE_HOST_LAUNCH_S;
}

}  // namespace loom::strategies
