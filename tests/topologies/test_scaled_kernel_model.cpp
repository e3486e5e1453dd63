// The kernel model scaled by fitted factors: matmul work by dtype, memory-bound work by time.
#include <doctest/doctest.h>

#include <memory>

#include "common/error.hpp"
#include "topologies/gpu_catalog.hpp"
#include "topologies/scaled_kernel_model.hpp"

using namespace loom;
using namespace loom::topo;

TEST_CASE("topologies::ScaledKernelModel: GEMMs by the dtype's efficiency, memory-bound by time") {
  auto inner = std::make_shared<DatasheetKernelModel>(find_gpu("h100-sxm"));
  KernelScales s;
  s.compute[dtype_index(DType::BF16)] = 0.8;
  s.compute[dtype_index(DType::TF32)] = 0.5;
  s.memory_bound = 1.25;
  const ScaledKernelModel scaled(inner, s);
  KernelOp gemm;
  gemm.m = gemm.n = gemm.k = 4096;
  gemm.forward_flops = 2.0 * 4096 * 4096 * 4096;
  CHECK(scaled.seconds(gemm, KernelPass::FORWARD, DType::BF16) ==
        doctest::Approx(inner->seconds(gemm, KernelPass::FORWARD, DType::BF16) / 0.8).scale(0));
  // fp32 math runs on TF32 tensor cores: the TF32 factor applies.
  CHECK(scaled.seconds(gemm, KernelPass::FORWARD, DType::FP32) ==
        doctest::Approx(inner->seconds(gemm, KernelPass::FORWARD, DType::FP32) / 0.5).scale(0));
  CHECK(scaled.seconds(gemm, KernelPass::FORWARD, DType::FP16) ==
        doctest::Approx(inner->seconds(gemm, KernelPass::FORWARD, DType::FP16)).scale(0));
  KernelOp elementwise;
  elementwise.kind = KernelKind::MEMORY_BOUND;
  elementwise.bytes = 1e9;
  CHECK(scaled.seconds(elementwise, KernelPass::FORWARD, DType::BF16) ==
        doctest::Approx(inner->seconds(elementwise, KernelPass::FORWARD, DType::BF16) * 1.25)
            .scale(0));
  CHECK(scaled.peak_flops(DType::BF16) == inner->peak_flops(DType::BF16));
  // Every dtype has its slot, FP4 (the last) included: with no FP4 factor an FP4 GEMM is the
  // inner model's, whatever the other scales are.
  const ScaledKernelModel b200(std::make_shared<DatasheetKernelModel>(find_gpu("b200")), s);
  CHECK(b200.seconds(gemm, KernelPass::FORWARD, DType::FP4) ==
        DatasheetKernelModel(find_gpu("b200")).seconds(gemm, KernelPass::FORWARD, DType::FP4));
  s.memory_bound = 0;
  CHECK_THROWS_AS(ScaledKernelModel(inner, s), InternalError);
}
