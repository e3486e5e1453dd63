#pragma once
// The default host time per eager kernel launch, shared by the step options and the pass
// costing (a tiny header: step_simulator.hpp is widely included).

namespace loom::strategies {

/// The host seconds per eager kernel launch loom assumes by default (SimulateOptions::
/// host_launch_s, --host-launch): Python, the ATen dispatcher and cudaLaunchKernel, 5-25 us
/// per op (docs/defaults.md); the host speed at which the framework host costs of
/// pass_cost.hpp are quoted.
inline constexpr double REFERENCE_HOST_LAUNCH_S = 10e-6;

}  // namespace loom::strategies
