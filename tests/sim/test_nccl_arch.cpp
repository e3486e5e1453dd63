// NCCL's architecture row per catalog GPU. NCCL v2.30.7-1 tuning.cc picks the row by the
// lowest compute capability: >= 10.0 Blackwell, >= 9.0 Hopper, >= 8.0 Ampere, else Volta.
// Compute capabilities (CUDA C++ Programming Guide, "Compute Capabilities"): A100 8.0,
// L40S and RTX 4090 8.9, H100 and H200 9.0, B200 10.0. AMD GPUs (RCCL) keep the Ampere row.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "sim/nccl_model.hpp"
#include "topologies/gpu_catalog.hpp"

using namespace loom;

TEST_CASE("sim::nccl_arch: each catalog GPU reads the row of its compute capability") {
  const std::map<std::string, sim::nccl::Arch> expected = {
      {"a100-sxm-40gb", sim::nccl::AMPERE},  {"a100-sxm-80gb", sim::nccl::AMPERE},
      {"a100-pcie-40gb", sim::nccl::AMPERE}, {"a100-pcie-80gb", sim::nccl::AMPERE},
      {"h100-sxm", sim::nccl::HOPPER},       {"h100-pcie", sim::nccl::HOPPER},
      {"h100-nvl", sim::nccl::HOPPER},       {"h200", sim::nccl::HOPPER},
      {"h200-nvl", sim::nccl::HOPPER},       {"b200", sim::nccl::BLACKWELL},
      {"gb200", sim::nccl::BLACKWELL},       {"b300", sim::nccl::BLACKWELL},
      {"gb300", sim::nccl::BLACKWELL},       {"l40s", sim::nccl::AMPERE},
      {"rtx4090", sim::nccl::AMPERE},        {"mi300x", sim::nccl::AMPERE},
  };
  CHECK(expected.size() == topo::gpu_catalog().size());
  for (const auto& g : topo::gpu_catalog()) {
    CAPTURE(g.name);
    REQUIRE(expected.count(g.name) == 1);
    CHECK(sim::nccl_arch(g) == expected.at(g.name));
  }
  // A GPU JSON may set the architecture: a Volta part reads the Volta row.
  topo::GpuSpec v100 = topo::find_gpu("a100");
  v100.arch = topo::GpuArch::VOLTA;
  CHECK(sim::nccl_arch(v100) == sim::nccl::VOLTA);
}
