#pragma once
// Transitional: the kernel-time model is topologies/kernel_model.hpp. This header keeps
// strategies/step_simulator.* compiling until it includes kernel_model.hpp and asks
// KernelTimeModel::seconds(); delete it then.
#include "topologies/kernel_model.hpp"

namespace loom::topo {

/// The datasheet kernel model under its former name (transitional, see above).
using GpuCostModel = DatasheetKernelModel;

}  // namespace loom::topo
