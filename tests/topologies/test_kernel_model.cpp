// The GPU kernel-time model (topologies/kernel_model): each expected time is worked out by
// hand from the datasheet figures cited and the coefficients documented in docs/simulate.md
// (matmul_peak_fraction 0.80, matmul_half_dim 48, tile 128, memory_bandwidth_fraction 0.80,
// attention_fraction 0.55, attention_backward_ratio 0.8, kernel overhead 4 us).
#include <doctest/doctest.h>

#include "common/error.hpp"
#include "topologies/kernel_model.hpp"

using namespace loom::topo;

namespace {

KernelOp gemm(std::int64_t m, std::int64_t n, std::int64_t k) {
  KernelOp op;
  op.kind = KernelKind::GEMM;
  op.m = m;
  op.n = n;
  op.k = k;
  const double flops = 2.0 * double(m) * double(n) * double(k);
  op.forward_flops = op.backward_input_flops = op.backward_weight_flops = flops;
  return op;
}

}  // namespace

TEST_CASE("topologies::DatasheetKernelModel: a 2048x1024x4096 bf16 GEMM on A100, by hand") {
  // A100 datasheet: 312 TFLOP/s dense bf16; whitepaper: 108 SMs.
  // Shape: x/(x+48) per dimension over 8192/8240:
  //   (2048/2096)(1024/1072)(4096/4144) / (8192/8240)^3 = 0.97710 * 0.95522 * 0.98842 / 0.98262
  //   = 0.938849.
  // Waves: (2048/128)(1024/128) = 128 tiles on 108 SMs = 2 waves, 128/216 = 0.592593 busy.
  // Efficiency 0.80 * 0.938849 * 0.592593 = 0.445084; FLOPs 2*2048*1024*4096 = 1.71799e10;
  // time = 1.71799e10 / (312e12 * 0.445084) + 4e-6 = 123.715 us + 4 us = 127.715 us.
  DatasheetKernelModel a100(find_gpu("a100"));
  CHECK(a100.matmul_efficiency(2048, 1024, 4096) == doctest::Approx(0.445084).epsilon(1e-5));
  CHECK(a100.seconds(gemm(2048, 1024, 4096), KernelPass::FORWARD, DType::BF16) ==
        doctest::Approx(127.715e-6).epsilon(1e-5));
  // The same GEMM on a GPU with 128 SMs fills one wave exactly: efficiency 0.80 * 0.938849.
  GpuSpec spec = find_gpu("a100");
  spec.sm_count = 128;
  DatasheetKernelModel wide(spec);
  CHECK(wide.matmul_efficiency(2048, 1024, 4096) == doctest::Approx(0.751079).epsilon(1e-5));
  // 108 SMs: 108 tiles fill one wave exactly; 109 tiles need two waves (109/216 busy).
  const double full = a100.matmul_efficiency(128 * 108, 128, 4096);
  const double spill = a100.matmul_efficiency(128 * 109, 128, 4096);
  CHECK(spill == doctest::Approx(full * (109.0 / 216.0)).epsilon(0.01));
}

TEST_CASE("topologies::DatasheetKernelModel: an 8192^3 bf16 GEMM against datasheet peaks") {
  // Independent of the model: an 8192 x 8192 x 8192 GEMM is 2 * 8192^3 = 1,099,511,627,776
  // FLOPs. No kernel beats the dense datasheet peak, so on A100 (312 TFLOP/s bf16, A100
  // datasheet) it takes at least 1.0995e12 / 312e12 = 3.524 ms and on H100 SXM (989.4
  // TFLOP/s, H100 datasheet) at least 1.111 ms. The upper bound, 1/0.70 of that, is a
  // plausibility band: cuBLAS is reported at 75-85% of dense peak on such GEMMs (the range
  // docs/simulate.md gives for matmul_peak_fraction), so a model slower than 70% is wrong.
  const double flops = 1'099'511'627'776.0;
  KernelOp op;
  op.m = op.n = op.k = 8192;
  op.forward_flops = flops;
  const double a100 =
      DatasheetKernelModel(find_gpu("a100")).seconds(op, KernelPass::FORWARD, DType::BF16);
  CHECK(a100 >= 3.524e-3);
  CHECK(a100 <= 3.524e-3 / 0.70);
  const double h100 =
      DatasheetKernelModel(find_gpu("h100")).seconds(op, KernelPass::FORWARD, DType::BF16);
  CHECK(h100 >= 1.111e-3);
  CHECK(h100 <= 1.111e-3 / 0.70);
  // The H100 is faster by less than its 989.4 / 312 = 3.17x peak ratio: its 132 SMs take
  // 4,096 tiles in 32 waves (31.03 busy), the A100's 108 in 38 (37.93 busy).
  CHECK(a100 / h100 < 989.4 / 312);
  CHECK(a100 / h100 > 3.0);
}

TEST_CASE("topologies::DatasheetKernelModel: backward GEMMs run at their transposed shapes") {
  // Forward [4096 x 1024]·[1024 x 64] (a skinny output): 32 x 1 = 32 tiles < 108 SMs, split-K,
  // no wave loss. dA = dC·Bᵀ is timed at (m, n, k) = (4096, 1024, 64): 32 x 8 = 256 tiles =
  // 3 waves on 108 SMs, 256/324 busy. dB = Aᵀ·dC at (1024, 64, 4096): 8 tiles, no loss. The
  // per-dimension saturation is the same product for all three, and so are the FLOPs: the
  // weight gradient takes the forward's time, the input gradient 324/256 of its compute.
  DatasheetKernelModel a100(find_gpu("a100"));
  const KernelOp op = gemm(4096, 64, 1024);
  const double overhead = 4e-6;
  const double fwd = a100.seconds(op, KernelPass::FORWARD, DType::BF16);
  const double dgrad = a100.seconds(op, KernelPass::BACKWARD_INPUT, DType::BF16);
  const double wgrad = a100.seconds(op, KernelPass::BACKWARD_WEIGHT, DType::BF16);
  CHECK(wgrad == doctest::Approx(fwd));
  CHECK(dgrad - overhead == doctest::Approx((fwd - overhead) * 324.0 / 256.0));
  // Forward by hand: shape 0.549059, efficiency 0.80 * 0.549059 = 0.439247;
  // 2*4096*64*1024 = 5.36871e8 FLOPs / (312e12 * 0.439247) = 3.9175 us, + 4 us.
  CHECK(fwd == doctest::Approx(7.9175e-6).epsilon(1e-4));
  const PassSeconds all = a100.pass_seconds(op, DType::BF16);
  CHECK(all.forward == fwd);
  CHECK(all.backward_input == dgrad);
  CHECK(all.backward_weight == wgrad);
}

TEST_CASE("topologies::DatasheetKernelModel: fused causal attention runs half its FLOPs") {
  // H100 SXM datasheet: 989.4 TFLOP/s dense bf16. 1e12 forward FLOPs, causal: the fused
  // kernel computes 0.5e12 at 0.55 of peak = 0.5e12 / 544.17e12 = 918.83 us, + 4 us.
  DatasheetKernelModel h100(find_gpu("h100"));
  KernelOp op;
  op.kind = KernelKind::ATTENTION;
  op.fused = true;
  op.causal = true;
  op.forward_flops = 1e12;
  op.backward_input_flops = 1e12;
  op.backward_weight_flops = 1e12;
  CHECK(h100.seconds(op, KernelPass::FORWARD, DType::BF16) ==
        doctest::Approx(922.83e-6).epsilon(1e-5));
  // Backward: 2e12 FLOPs, half skipped, at 0.8 of the forward rate, as one kernel:
  // (1e12 / 544.17e12 + 4e-6) / 0.8 = (1837.66 + 4) us / 0.8 = 2302.08 us; no weight pass.
  CHECK(h100.seconds(op, KernelPass::BACKWARD_INPUT, DType::BF16) ==
        doctest::Approx(2302.08e-6).epsilon(1e-5));
  CHECK(h100.seconds(op, KernelPass::BACKWARD_WEIGHT, DType::BF16) == 0);
  // Not causal: all 1e12 FLOPs = 1837.66 us + 4 us.
  op.causal = false;
  CHECK(h100.seconds(op, KernelPass::FORWARD, DType::BF16) ==
        doctest::Approx(1841.66e-6).epsilon(1e-5));
}

TEST_CASE("topologies::DatasheetKernelModel: unfused attention runs as GEMMs, backward as one") {
  // Scores Q·Kᵀ for 32 heads: [2048 x 128]·[128 x 2048], batch 32 (m 2048, n 2048, k 128).
  // Unfused, it is timed exactly as that batched GEMM; the backward (dQ and dK together) as
  // one GEMM of both halves' FLOPs at the dA shape (m, k, n) = (2048, 128, 2048).
  DatasheetKernelModel a100(find_gpu("a100"));
  KernelOp attn;
  attn.kind = KernelKind::ATTENTION;
  attn.m = 2048;
  attn.n = 2048;
  attn.k = 128;
  attn.batch = 32;
  attn.causal = true;  // ignored unfused: the GEMMs compute the masked half too
  attn.forward_flops = 2.0 * 2048 * 2048 * 128 * 32;
  attn.backward_input_flops = attn.forward_flops;
  attn.backward_weight_flops = attn.forward_flops;
  KernelOp same = attn;
  same.kind = KernelKind::GEMM;
  CHECK(a100.seconds(attn, KernelPass::FORWARD, DType::BF16) ==
        a100.seconds(same, KernelPass::FORWARD, DType::BF16));
  same.backward_input_flops = 2 * attn.forward_flops;
  CHECK(a100.seconds(attn, KernelPass::BACKWARD_INPUT, DType::BF16) ==
        a100.seconds(same, KernelPass::BACKWARD_INPUT, DType::BF16));
  CHECK(a100.seconds(attn, KernelPass::BACKWARD_WEIGHT, DType::BF16) == 0);
  // By hand: 16 x 16 x 32 = 8192 tiles = 76 waves of 108 (8192/8208 busy); shape
  // (2048/2096)^2 (128/176) / (8192/8240)^3 = 0.706621; efficiency 0.80 x 0.706621 x 0.998051 =
  // 0.564195; 3.43597e10 FLOPs / (312e12 x 0.564195) = 195.19 us, + 4 us.
  CHECK(a100.seconds(attn, KernelPass::FORWARD, DType::BF16) ==
        doctest::Approx(199.19e-6).epsilon(1e-4));
}

TEST_CASE("topologies::DatasheetKernelModel: memory-bound ops move twice their bytes backward") {
  // H100 SXM datasheet: 3.35 TB/s HBM3, at 0.80: 2.68e12 B/s. 1 GB forward = 373.134 us + 4 us;
  // backward 2 GB = 746.269 us + 4 us, one kernel; no separate weight pass.
  DatasheetKernelModel h100(find_gpu("h100"));
  KernelOp op;
  op.kind = KernelKind::MEMORY_BOUND;
  op.bytes = 1e9;
  CHECK(h100.seconds(op, KernelPass::FORWARD, DType::BF16) ==
        doctest::Approx(377.134e-6).epsilon(1e-5));
  CHECK(h100.seconds(op, KernelPass::BACKWARD_INPUT, DType::BF16) ==
        doctest::Approx(750.269e-6).epsilon(1e-5));
  CHECK(h100.seconds(op, KernelPass::BACKWARD_WEIGHT, DType::BF16) == 0);
  GpuEfficiency e;
  e.memory_bandwidth_fraction = 0.5;
  DatasheetKernelModel slow(find_gpu("h100"), e);
  // 1 GB at 1.675e12 B/s = 597.01 us + 4 us.
  CHECK(slow.seconds(op, KernelPass::FORWARD, DType::BF16) ==
        doctest::Approx(601.01e-6).epsilon(1e-5));
}

TEST_CASE("topologies::DatasheetKernelModel: fp32 math runs at the TF32 tensor-core peak") {
  // A100 datasheet: TF32 tensor core 156 TFLOP/s dense (FP32 non-tensor 19.5); bf16 312.
  DatasheetKernelModel a100(find_gpu("a100"));
  CHECK(a100.peak_flops(DType::FP32) == doctest::Approx(156e12));
  CHECK(a100.peak_flops(DType::TF32) == doctest::Approx(156e12));
  CHECK(tensor_core_dtype(DType::FP32) == DType::TF32);
  // Half the peak: the compute part of a GEMM takes twice the bf16 time.
  const KernelOp op = gemm(2048, 1024, 4096);
  const double bf16 = a100.seconds(op, KernelPass::FORWARD, DType::BF16);
  const double fp32 = a100.seconds(op, KernelPass::FORWARD, DType::FP32);
  CHECK(fp32 - 4e-6 == doctest::Approx(2 * (bf16 - 4e-6)));
  // A100 has no FP8 tensor cores: fp8 math runs at the bf16 peak. H100 SXM datasheet: fp8
  // 1,978.9 TFLOP/s dense.
  CHECK(a100.peak_flops(DType::FP8) == doctest::Approx(312e12));
  CHECK(DatasheetKernelModel(find_gpu("h100")).peak_flops(DType::FP8) ==
        doctest::Approx(1978.9e12));
}

TEST_CASE("topologies::DatasheetKernelModel: an Adam step over 1e9 parameters, by hand") {
  // Mixed-precision Adam moves 30 B per parameter (models::optimizer_step_bytes_per_param:
  // reads grad, master, m, v = 16, writes master, m, v = 12, writes the bf16 copy = 2).
  // 3e10 B on H100 SXM at 0.80 x 3.35 TB/s = 11.19403 ms, + 4 us.
  DatasheetKernelModel h100(find_gpu("h100"));
  KernelOp step;
  step.kind = KernelKind::OPTIMIZER;
  step.bytes = 1e9 * 30;
  CHECK(h100.seconds(step, KernelPass::FORWARD, DType::BF16) ==
        doctest::Approx(11.19803e-3).epsilon(1e-6));
  CHECK(h100.seconds(step, KernelPass::BACKWARD_INPUT, DType::BF16) == 0);
  // No work, no kernel: zero FLOPs or bytes cost no overhead.
  KernelOp none;
  CHECK(h100.seconds(none, KernelPass::FORWARD, DType::BF16) == 0);
}

TEST_CASE("topologies::DatasheetKernelModel: a spec without an SM count is refused") {
  GpuSpec spec = find_gpu("h100");
  spec.sm_count = 0;
  CHECK_THROWS_AS(DatasheetKernelModel{spec}, loom::InternalError);
}
