// The GPU kernel-time model (topologies/gpu_cost_model): peak x efficiency, checked by hand.
#include <doctest/doctest.h>

#include "topologies/gpu_cost_model.hpp"

using namespace loom::topo;

TEST_CASE("strategies::GpuCostModel: a large square GEMM runs at the peak fraction") {
  // A100 datasheet: 312 TFLOP/s dense bf16. 8192^3 GEMM = 2·8192^3 FLOPs at 0.80 of peak.
  GpuCostModel a100(find_gpu("a100"));
  const double flops = 2.0 * 8192.0 * 8192.0 * 8192.0;
  CHECK(a100.matmul_efficiency(8192, 8192, 8192) == doctest::Approx(0.80).epsilon(0.01));
  CHECK(a100.matmul_time_s(8192, 8192, 8192, DType::BF16) ==
        doctest::Approx(flops / (312e12 * 0.80) + 4e-6).epsilon(0.01));
}

TEST_CASE("strategies::GpuCostModel: skinny shapes and partial waves are slower per FLOP") {
  GpuCostModel a100(find_gpu("a100"));
  CHECK(a100.matmul_efficiency(8192, 64, 8192) < 0.6 * a100.matmul_efficiency(8192, 8192, 8192));
  // 108 SMs: 108 tiles fill one wave exactly; 109 tiles need two waves (109/216 busy).
  const double full = a100.matmul_efficiency(128 * 108, 128, 4096);
  const double spill = a100.matmul_efficiency(128 * 109, 128, 4096);
  CHECK(spill == doctest::Approx(full * (109.0 / 216.0)).epsilon(0.01));
}

TEST_CASE("strategies::GpuCostModel: memory-bound kernels run at HBM bandwidth x efficiency") {
  // H100 SXM datasheet: 3.35 TB/s HBM3. 1 GB at 80% of it.
  GpuCostModel h100(find_gpu("h100"));
  CHECK(h100.memory_time_s(1e9) == doctest::Approx(1e9 / (3.35e12 * 0.8) + 4e-6));
  CHECK(h100.peak_flops(DType::FP8) == doctest::Approx(1978.9e12));
  GpuEfficiency e;
  e.memory_bandwidth_fraction = 0.5;
  GpuCostModel slow(find_gpu("h100"), e);
  CHECK(slow.memory_time_s(1e9) > 1.5 * h100.memory_time_s(1e9));
}
