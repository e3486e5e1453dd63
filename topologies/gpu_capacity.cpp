// What a catalog GPU really holds: the memory the CUDA runtime reports, not the datasheet's GB.
#include <utility>

#include "topologies/gpu_catalog.hpp"

namespace loom::topo {
namespace {

constexpr double GIB = 1024.0 * 1024 * 1024;

// The runtime's total, in GiB: what PyTorch prints as "GPU 0 has a total capacity of X GiB" in
// its OutOfMemoryError (c10/cuda/CUDACachingAllocator.cpp: cudaMemGetInfo's total / 2^30, two
// decimals; torch.cuda.get_device_properties().total_memory is the same figure). It is below
// nvidia-smi's total by the driver's own reservation (0.35-0.9 GiB: H100 80GB HBM3 81,559 MiB,
// A100 80GB 81,920 MiB, A100 40GB 40,960 MiB, L40S 46,068 MiB in nvidia-smi, modal-labs/
// modal-client PR #2797; B200 183,359 MiB, NVIDIA/TensorRT-LLM issue #10278; H200 143,771 MiB
// on this project's H200) and below the datasheet's GB. The CUDA context and what the
// framework reserves come out of it (models/memory.hpp, cuda_context_bytes).
struct RuntimeCapacity {
  const char* gpu;
  double gib;
  const char* source;
};

#define LOOM_OOM "PyTorch OutOfMemoryError 'total capacity' in published logs"
constexpr RuntimeCapacity RUNTIME_CAPACITY[] = {
    {"a100-sxm-40gb", 39.39, "39.39 GiB (nvidia-smi 40,960 MiB); " LOOM_OOM},
    {"a100-pcie-40gb", 39.39, "39.39 GiB, the SXM4 40GB's (the same 40 GB of HBM2)"},
    {"a100-sxm-80gb", 79.15, "79.15 GiB (nvidia-smi 81,920 MiB); " LOOM_OOM},
    {"a100-pcie-80gb", 79.15, "79.15 GiB, the SXM4 80GB's (the same 80 GB of HBM2e)"},
    {"h100-sxm", 79.11, "79.11 GiB (H100 80GB HBM3, nvidia-smi 81,559 MiB); " LOOM_OOM},
    {"h100-pcie", 79.11, "79.11 GiB, the SXM5's (80 GB; no PCIe figure found)"},
    {"h100-nvl", 93.10, "93.10 GiB (logs show 93.09-93.11); " LOOM_OOM},
    // cudaMemGetInfo total 150,109,880,320 B on this project's H200 (tests/validation/
    // measured/h200-2026-11-28: torch_ops.json total_bytes), 139.80 GiB, as PyTorch's H200
    // OOM messages print.
    {"h200", 150109880320.0 / GIB,
     "cudaMemGetInfo 150,109,880,320 B (tests/validation/measured/h200-2026-11-28)"},
    {"h200-nvl", 150109880320.0 / GIB, "the H200 SXM's (the same 141 GB of HBM3e)"},
    {"b200", 178.35, "178.35 GiB (device query, pytorch/ao PR #4002); " LOOM_OOM},
    {"gb200", 184.31, "184.31 GiB (B200 in GB200); " LOOM_OOM},
    {"b300", 267.69, "267.69 GiB (B300 SXM6); " LOOM_OOM},
    {"gb300", 267.69, "267.69 GiB, the HGX B300's (the same 288 GB of HBM3e; a lower bound)"},
    {"l40s", 44.39, "44.39 GiB (nvidia-smi 46,068 MiB); " LOOM_OOM},
    {"rtx4090", 23.68, "23.68 GiB (an RTX 4090 OOM message, zai-org/CogVideo issue #36)"},
    {"mi300x", 191.98, "191.98 GiB (HIP OutOfMemoryError on MI300X); " LOOM_OOM},
};
#undef LOOM_OOM

}  // namespace

std::vector<GpuSpec> with_runtime_capacity(std::vector<GpuSpec> catalog) {
  for (GpuSpec& g : catalog) {
    for (const RuntimeCapacity& r : RUNTIME_CAPACITY) {
      if (g.name != r.gpu) continue;
      g.hbm_bytes = r.gib * GIB;
      g.capacity_source = r.source;
    }
  }
  return catalog;
}

}  // namespace loom::topo
