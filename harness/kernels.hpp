#pragma once
// Device kernels the host-side measuring code launches (defined in memory.cu).
#include <cuda_runtime.h>

#include <cstdint>

namespace loom::harness {

/// Element types the fill kernel writes.
enum class FillType { F32, F16, BF16, E4M3 };

/// Fills `count` elements at `data` with small pseudo-random values in [-1, 1) (zeros would
/// let the GPU run GEMMs at a lower power than real data does); enqueued on `stream`.
void fill_values(void* data, std::int64_t count, FillType type, cudaStream_t stream);

}  // namespace loom::harness
