// The GPU kernel-time model (topologies/kernel_model): each expected time is worked out by
// hand from the datasheet figures cited and the coefficients documented in docs/simulate.md
// (matmul_half_dim by architecture: 48 without a sweep, tile 128, memory_bandwidth_fraction 0.80,
// attention_backward_ratio 0.8, kernel overhead 4 us) and docs/defaults.md (large-GEMM fractions:
// A100 0.869, H100 bf16 0.803 / fp8 0.709; fused attention: Hopper cuDNN 518 / 989).
#include <doctest/doctest.h>

#include <string>

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

// A fused or unfused attention op of `forward_flops` counted FLOPs, causal or not.
KernelOp attention(bool fused, bool causal, double forward_flops) {
  KernelOp op;
  op.kind = KernelKind::ATTENTION;
  op.fused = fused;
  op.causal = causal;
  op.forward_flops = forward_flops;
  return op;
}

}  // namespace

TEST_CASE("topologies::DatasheetKernelModel: a 2048x1024x4096 bf16 GEMM on A100, by hand") {
  // A100 datasheet: 312 TFLOP/s dense bf16; whitepaper: 108 SMs.
  // Shape: x/(x+48) per dimension over 8192/8240:
  //   (2048/2096)(1024/1072)(4096/4144) / (8192/8240)^3 = 0.97710 * 0.95522 * 0.98842 / 0.98262
  //   = 0.938849.
  // Waves: (2048/128)(1024/128) = 128 tiles on 108 SMs = 2 waves, 128/216 = 0.592593 busy.
  // Large-GEMM fraction 0.869 (A100 SXM MAMF 271.2 / 312, docs/defaults.md).
  // Efficiency 0.869 * 0.938849 * 0.592593 = 0.483473; FLOPs 2*2048*1024*4096 = 1.71799e10;
  // time = 1.71799e10 / (312e12 * 0.483473) = 113.892 us at the boost clock, / (1305/1410)
  // at the sustained load clock (gpu_catalog.hpp) = 123.056 us, + 4 us = 127.056 us.
  DatasheetKernelModel a100(find_gpu("a100"));
  CHECK(a100.matmul_efficiency(2048, 1024, 4096) == doctest::Approx(0.483473).epsilon(1e-5));
  CHECK(a100.seconds(gemm(2048, 1024, 4096), KernelPass::FORWARD, DType::BF16) ==
        doctest::Approx(127.056e-6).epsilon(1e-4).scale(0));
  // The same GEMM on a GPU with 128 SMs fills one wave exactly: efficiency 0.869 * 0.938849.
  GpuSpec spec = find_gpu("a100");
  spec.sm_count = 128;
  DatasheetKernelModel wide(spec);
  CHECK(wide.matmul_efficiency(2048, 1024, 4096) == doctest::Approx(0.815860).epsilon(1e-5));
  // 108 SMs: 108 tiles fill one wave exactly; 109 tiles need two waves (109/216 busy).
  const double full = a100.matmul_efficiency(128 * 108, 128, 4096);
  const double spill = a100.matmul_efficiency(128 * 109, 128, 4096);
  CHECK(spill == doctest::Approx(full * (109.0 / 216.0)).epsilon(0.01));
}

TEST_CASE("topologies::DatasheetKernelModel: an 8192^3 bf16 GEMM against datasheet peaks") {
  // Independent of the model: an 8192 x 8192 x 8192 GEMM is 2 * 8192^3 = 1,099,511,627,776
  // FLOPs. No kernel beats the dense datasheet peak, so on A100 (312 TFLOP/s bf16, A100
  // datasheet) it takes at least 1.0995e12 / 312e12 = 3.524 ms and on H100 SXM (989.4
  // TFLOP/s, H100 datasheet) at least 1.111 ms. The upper bound, 1/0.65 of that, is a
  // plausibility band: cuBLAS bursts reach 75-85% of dense peak on such GEMMs (the range
  // docs/simulate.md gives for matmul_peak_fraction) and hold 64-76% once the GPU sits at
  // its power limit (S. Bekman's MSMF: B200 64%, H200 76%), so a model slower than 65% is
  // wrong.
  const double flops = 1'099'511'627'776.0;
  KernelOp op;
  op.m = op.n = op.k = 8192;
  op.forward_flops = flops;
  const double a100 =
      DatasheetKernelModel(find_gpu("a100")).seconds(op, KernelPass::FORWARD, DType::BF16);
  CHECK(a100 >= 3.524e-3);
  CHECK(a100 <= 3.524e-3 / 0.65);
  const double h100 =
      DatasheetKernelModel(find_gpu("h100")).seconds(op, KernelPass::FORWARD, DType::BF16);
  CHECK(h100 >= 1.111e-3);
  CHECK(h100 <= 1.111e-3 / 0.65);
  // The H100 is faster by less than its 989.4 / 312 = 3.17x peak ratio: its large-GEMM
  // fraction is lower (0.803 vs 0.869, MAMF tables) and its 132 SMs take 4,096 tiles in 32
  // waves (31.03 busy), the A100's 108 in 38 (37.93 busy): 3.17 x 0.803 x 0.9697 / (0.869 x
  // 0.9981) = 2.847 at equal clocks; under load the H100 holds 0.888052 of its burst rate
  // (the H200's MSMF / MAMF), the A100 1305 / 1410: 2.847 x 0.888052 / 0.925532 = 2.732, a
  // little less with the 4 us per kernel.
  CHECK(a100 / h100 < 989.4 / 312);
  CHECK(a100 / h100 == doctest::Approx(2.732).epsilon(1e-2));
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
  CHECK(wgrad == doctest::Approx(fwd).scale(0));
  CHECK(dgrad - overhead == doctest::Approx((fwd - overhead) * 324.0 / 256.0).scale(0));
  // Forward by hand: shape 0.549059, efficiency 0.869 * 0.549059 = 0.477132;
  // 2*4096*64*1024 = 5.36871e8 FLOPs / (312e12 * 0.477132) = 3.6064 us, / (1305/1410)
  // sustained = 3.8966 us, + 4 us.
  CHECK(fwd == doctest::Approx(7.8966e-6).epsilon(1e-4).scale(0));
  const PassSeconds all = a100.pass_seconds(op, DType::BF16);
  CHECK(all.forward == fwd);
  CHECK(all.backward_input == dgrad);
  CHECK(all.backward_weight == wgrad);
}

TEST_CASE("topologies::DatasheetKernelModel: fused causal attention runs half its FLOPs") {
  // H100 SXM datasheet: 989.4 TFLOP/s dense bf16. 1e12 forward FLOPs, causal: the fused
  // kernel computes 0.5e12 at 518/989 of peak (Hopper, cuDNN: FlashAttention-3 paper Fig. 5)
  // = 0.5e12 / 518.21e12 = 964.86 us at the boost clock, / 0.888052 sustained load clock
  // (H200 SXM's MSMF / MAMF, gpu_catalog.cpp) = 1086.49 us, + 4 us.
  DatasheetKernelModel h100(find_gpu("h100"));
  KernelOp op = attention(true, true, 1e12);
  op.backward_input_flops = 1e12;
  op.backward_weight_flops = 1e12;
  CHECK(h100.seconds(op, KernelPass::FORWARD, DType::BF16) ==
        doctest::Approx(1090.49e-6).epsilon(1e-4).scale(0));
  // Backward: 2e12 FLOPs, half skipped, at 0.8 of the forward rate, as one kernel:
  // (1e12 / 518.21e12 / 0.888052 + 4e-6) / 0.8 = (2172.98 + 4) us / 0.8 = 2721.23 us; no
  // weight pass.
  CHECK(h100.seconds(op, KernelPass::BACKWARD_INPUT, DType::BF16) ==
        doctest::Approx(2721.23e-6).epsilon(1e-4).scale(0));
  CHECK(h100.seconds(op, KernelPass::BACKWARD_WEIGHT, DType::BF16) == 0);
  // Not causal: all 1e12 FLOPs = 2172.98 us + 4 us.
  op.causal = false;
  CHECK(h100.seconds(op, KernelPass::FORWARD, DType::BF16) ==
        doctest::Approx(2176.98e-6).epsilon(1e-4).scale(0));
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
  // (2048/2096)^2 (128/176) / (8192/8240)^3 = 0.706621; efficiency 0.869 x 0.706621 x
  // 0.998051 = 0.612857; 3.43597e10 FLOPs / (312e12 x 0.612857) = 179.69 us, / (1305/1410)
  // sustained = 194.15 us, + 4 us.
  CHECK(a100.seconds(attn, KernelPass::FORWARD, DType::BF16) ==
        doctest::Approx(198.15e-6).epsilon(1e-4).scale(0));
}

TEST_CASE("topologies::DatasheetKernelModel: memory-bound ops move twice their bytes backward") {
  // H100 SXM datasheet: 3.35 TB/s HBM3, at 0.80: 2.68e12 B/s. 1 GB forward = 373.134 us + 4 us;
  // backward 2 GB = 746.269 us + 4 us, one kernel; no separate weight pass.
  DatasheetKernelModel h100(find_gpu("h100"));
  KernelOp op;
  op.kind = KernelKind::MEMORY_BOUND;
  op.bytes = 1e9;
  CHECK(h100.seconds(op, KernelPass::FORWARD, DType::BF16) ==
        doctest::Approx(377.134e-6).epsilon(1e-4).scale(0));
  CHECK(h100.seconds(op, KernelPass::BACKWARD_INPUT, DType::BF16) ==
        doctest::Approx(750.269e-6).epsilon(1e-4).scale(0));
  CHECK(h100.seconds(op, KernelPass::BACKWARD_WEIGHT, DType::BF16) == 0);
  GpuEfficiency e;
  e.memory_bandwidth_fraction = 0.5;
  DatasheetKernelModel slow(find_gpu("h100"), e);
  // 1 GB at 1.675e12 B/s = 597.01 us + 4 us.
  CHECK(slow.seconds(op, KernelPass::FORWARD, DType::BF16) ==
        doctest::Approx(601.01e-6).epsilon(1e-4).scale(0));
}

TEST_CASE("topologies::DatasheetKernelModel: an unfused chain pays each kernel's overhead") {
  // H100 SXM, 3.35 TB/s x 0.80: 1 GB = 373.134 us; three kernels add 3 x 4 us. An op that
  // states its backward bytes (0.5 GB) moves those, not twice the forward.
  DatasheetKernelModel h100(find_gpu("h100"));
  KernelOp op;
  op.kind = KernelKind::MEMORY_BOUND;
  op.bytes = 1e9;
  op.kernels = 3;
  op.backward_bytes = 0.5e9;
  CHECK(h100.seconds(op, KernelPass::FORWARD, DType::BF16) ==
        doctest::Approx(385.134e-6).epsilon(1e-4).scale(0));
  CHECK(h100.seconds(op, KernelPass::BACKWARD_INPUT, DType::BF16) ==
        doctest::Approx(198.567e-6).epsilon(1e-4).scale(0));
  // From a CUDA graph each of the three launches saves 0.4 us (Gray 2019, NVIDIA blog).
  op.graphed = true;
  CHECK(h100.seconds(op, KernelPass::FORWARD, DType::BF16) ==
        doctest::Approx(383.934e-6).epsilon(1e-4).scale(0));
  CHECK(h100.seconds(op, KernelPass::BACKWARD_WEIGHT, DType::BF16) == 0);
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
  CHECK(fp32 - 4e-6 == doctest::Approx(2 * (bf16 - 4e-6)).scale(0));
  // A100 has no FP8 tensor cores: fp8 math runs at the bf16 peak. H100 SXM datasheet: fp8
  // 1,978.9 TFLOP/s dense.
  CHECK(a100.peak_flops(DType::FP8) == doctest::Approx(312e12));
  CHECK(DatasheetKernelModel(find_gpu("h100")).peak_flops(DType::FP8) ==
        doctest::Approx(1978.9e12));
}

TEST_CASE("topologies::DatasheetKernelModel: the peak's dtype names the tensor cores it is of") {
  // What MFU is reported against: fp32 math on TF32 tensor cores, fp8 on a GPU without FP8
  // tensor cores (A100) on the bf16 ones, otherwise the math dtype itself.
  DatasheetKernelModel a100(find_gpu("a100")), h100(find_gpu("h100"));
  CHECK(a100.peak_dtype(DType::FP32) == DType::TF32);
  CHECK(a100.peak_dtype(DType::FP8) == DType::BF16);
  CHECK(h100.peak_dtype(DType::FP8) == DType::FP8);
  CHECK(h100.peak_dtype(DType::BF16) == DType::BF16);
  CHECK(h100.peak_dtype(DType::FP16) == DType::FP16);
  // A GPU spec without a TF32 figure runs fp32 on plain FP32 units.
  GpuSpec no_tf32 = find_gpu("a100");
  no_tf32.tf32_flops = 0;
  CHECK(DatasheetKernelModel(no_tf32).peak_dtype(DType::FP32) == DType::FP32);
  CHECK(DatasheetKernelModel(no_tf32).peak_flops(DType::FP32) == no_tf32.fp32_flops);
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
        doctest::Approx(11.19803e-3).epsilon(1e-4).scale(0));
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

TEST_CASE("topologies::DatasheetKernelModel: large-GEMM fractions by architecture and dtype") {
  // S. Bekman, ml-engineering compute/accelerator/README.md, "Maximum Achievable Matmul
  // FLOPS" tables: A100 SXM bf16 271.2/312, H100 SXM bf16 794.5/989 and fp8 1402.6/1979,
  // B200 bf16 1745/2250 and fp8 3432.5/4500, GB200 1822/2500 and 3615.6/5000.
  CHECK(DatasheetKernelModel(find_gpu("a100")).gemm_fraction(DType::BF16) == 0.869);
  const DatasheetKernelModel h100(find_gpu("h100"));
  CHECK(h100.gemm_fraction(DType::BF16) == 0.803);
  CHECK(h100.gemm_fraction(DType::FP8) == 0.709);
  CHECK(h100.gemm_fraction(DType::FP32) == 0.803);  // TF32: the bf16 figure (no MAMF)
  const DatasheetKernelModel b200(find_gpu("b200"));
  CHECK(b200.gemm_fraction(DType::BF16) == 0.776);
  CHECK(b200.gemm_fraction(DType::FP8) == 0.763);
  CHECK(DatasheetKernelModel(find_gpu("gb200")).gemm_fraction(DType::FP8) == 0.723);
  // A100 has no FP8 tensor cores: fp8 math runs at the bf16 peak and fraction.
  CHECK(DatasheetKernelModel(find_gpu("a100")).gemm_fraction(DType::FP8) == 0.869);
  // An 8192^3 GEMM reaches exactly the large-GEMM fraction times wave quantisation: on H100
  // fp8 4096 tiles fill 32 waves of 132 SMs 4096/4224 busy: 0.709 x 0.969697 = 0.687515.
  CHECK(h100.matmul_efficiency(8192, 8192, 8192, 1, DType::FP8) ==
        doctest::Approx(0.687515).epsilon(1e-5));
  // A GPU JSON's measured figure wins over the architecture's; an explicit efficiency wins
  // over both.
  GpuSpec spec = find_gpu("h100");
  spec.gemm_fraction_fp8 = 0.6;
  spec.attention_fraction = 0.5;
  CHECK(DatasheetKernelModel(spec).gemm_fraction(DType::FP8) == 0.6);
  CHECK(DatasheetKernelModel(spec).gemm_fraction(DType::BF16) == 0.803);
  CHECK(DatasheetKernelModel(spec).attention_fraction() == 0.5);
  GpuEfficiency e;
  e.matmul_peak_fraction = 0.75;
  CHECK(DatasheetKernelModel(spec, e).gemm_fraction(DType::FP8) == 0.75);
  // Attention by generation: FA2 on A100 0.55 (Dao 2023), cuDNN on H100 518 of 989 TFLOP/s
  // (Shah 2024, Fig. 5).
  CHECK(DatasheetKernelModel(find_gpu("a100")).attention_fraction() == 0.55);
  CHECK(h100.attention_fraction() == doctest::Approx(518.0 / 989.0));
}

TEST_CASE("topologies::DatasheetKernelModel: mid-size GEMMs follow XLA's measured tables") {
  // XLA's GEMM table (openxla/xla default_matmul_perf_table.txtpb @336bb15c), TFLOP/s at
  // batch 1; the model at the boost clock (the table's short benchmarks), with its 4 us
  // kernel overhead, lands within 15% of each (the fit's rms is 9-12%).
  auto tflops = [](const char* gpu, std::int64_t m, std::int64_t n, std::int64_t k, DType math) {
    GpuSpec spec = find_gpu(gpu);
    spec.load_clock_fraction = 1;
    const DatasheetKernelModel model(spec);
    const KernelOp op = gemm(m, n, k);
    return op.forward_flops / model.seconds(op, KernelPass::FORWARD, math) / 1e12;
  };
  CHECK(tflops("h100", 4096, 4096, 4096, DType::BF16) == doctest::Approx(780).epsilon(0.15));
  CHECK(tflops("h100", 2048, 512, 2048, DType::BF16) == doctest::Approx(354).epsilon(0.15));
  CHECK(tflops("h100", 2048, 2048, 2048, DType::BF16) == doctest::Approx(641).epsilon(0.15));
  CHECK(tflops("b200", 4096, 4096, 4096, DType::BF16) == doctest::Approx(1417).epsilon(0.15));
  CHECK(tflops("b200", 2048, 2048, 2048, DType::BF16) == doctest::Approx(986).epsilon(0.15));
  CHECK(tflops("b200", 4096, 4096, 4096, DType::FP8) == doctest::Approx(2765).epsilon(0.15));
  CHECK(tflops("b200", 4096, 1024, 2048, DType::FP8) == doctest::Approx(1463).epsilon(0.15));
  CHECK(tflops("b200", 4096, 512, 2048, DType::FP8) == doctest::Approx(979).epsilon(0.15));
  // The half-dimensions by architecture and tensor dtype: faster tensor cores per SM need
  // larger GEMMs; architectures without a sweep keep 48; an explicit efficiency wins.
  CHECK(architecture_matmul_half_dim(GpuArch::HOPPER, DType::BF16) == 125);
  CHECK(architecture_matmul_half_dim(GpuArch::HOPPER, DType::FP8) == 200);
  CHECK(architecture_matmul_half_dim(GpuArch::BLACKWELL, DType::BF16) == 270);
  CHECK(architecture_matmul_half_dim(GpuArch::BLACKWELL, DType::FP8) == 435);
  CHECK(architecture_matmul_half_dim(GpuArch::AMPERE, DType::BF16) == 48);
  // A100 runs fp8 math on its bf16 tensor cores: the bf16 half-dimension.
  CHECK(DatasheetKernelModel(find_gpu("a100")).matmul_half_dim(DType::FP8) == 48);
  CHECK(DatasheetKernelModel(find_gpu("h100")).matmul_half_dim(DType::FP8) == 200);
  GpuEfficiency e;
  e.matmul_half_dim = 64;
  CHECK(DatasheetKernelModel(find_gpu("b200"), e).matmul_half_dim(DType::FP8) == 64);
}

TEST_CASE("topologies::DatasheetKernelModel: Blackwell attention from cuDNN's measured curves") {
  // cuDNN 9.18 on GB200, causal, head dim 128, 4k tokens: 1297 of 2500 TFLOP/s forward;
  // the backward at 0.8 of it (NVIDIA cudnn-frontend sdpa_benchmark_training results).
  const DatasheetKernelModel gb200(find_gpu("gb200")), gb300(find_gpu("gb300"));
  CHECK(gb200.attention_fraction() == doctest::Approx(1297.0 / 2500));
  CHECK(gb200.attention_backward_fraction() == doctest::Approx(1297.0 / 2500 * 0.8));
  // Blackwell Ultra: GB300 over GB200 in one cuDNN 9.22 run, 1703 / 1408 forward and
  // 1248 / 1148 backward: the doubled exponent units speed the forward, barely the backward.
  CHECK(gb300.attention_fraction() / gb200.attention_fraction() == doctest::Approx(1703.0 / 1408));
  CHECK(gb300.attention_backward_fraction() / gb200.attention_backward_fraction() ==
        doctest::Approx(1248.0 / 1148));
  CHECK(DatasheetKernelModel(find_gpu("b300")).attention_fraction() == gb300.attention_fraction());
  // A forward override drops the GPU's own backward figure for the default ratio.
  GpuEfficiency e;
  e.attention_fraction = 0.5;
  CHECK(DatasheetKernelModel(find_gpu("gb300"), e).attention_backward_fraction() ==
        doctest::Approx(0.4));
  // Shape: Blackwell's kernels lose more at short sequences (half_kv_tokens 730, not
  // Hopper's 200). cuDNN 9.18 on GB200, causal: 2k 1022, 4k 1297, 8k 1563 TFLOP/s; the law
  // gives each within 8%.
  const AttentionShapeModel bw = architecture_attention_shape(GpuArch::BLACKWELL);
  CHECK(bw.half_kv_tokens == 730);
  CHECK(architecture_attention_shape(GpuArch::HOPPER).half_kv_tokens == 200);
  CHECK(attention_shape_factor(2048, 2048, 128, true, bw) ==
        doctest::Approx(1022.0 / 1297).epsilon(0.08));
  CHECK(attention_shape_factor(8192, 8192, 128, true, bw) ==
        doctest::Approx(1563.0 / 1297).epsilon(0.08));
  // The model uses it: a 2k causal forward on GB200 takes 1297/1022-ish longer per FLOP
  // than at 4k, more than on H100 (FA3: 579/521).
  KernelOp op = attention(true, true, 1e12);
  op.head_dim = 128;
  auto per_flop = [&](const DatasheetKernelModel& k, std::int64_t s) {
    op.seq_q = op.seq_kv = s;
    return k.seconds(op, KernelPass::FORWARD, DType::BF16);
  };
  const DatasheetKernelModel h100(find_gpu("h100"));
  CHECK(per_flop(gb200, 2048) / per_flop(gb200, 4096) >
        per_flop(h100, 2048) / per_flop(h100, 4096) + 0.1);
}

TEST_CASE("topologies::DatasheetKernelModel: GPUs sustain their measured share of the burst rate") {
  // S. Bekman's MSMF (a matmul held 2 s at the power limit) over MAMF (the boost burst) of
  // the same run, mean of the BF16 and FP8 rows (ml-engineering compute/accelerator/README.md
  // @fe12f4e4): H200 SXM 755/850 and 1354/1525 (the H100 SXM takes it), HGX B200 1439/1737
  // and 2788/3350, HGX B300 1519/1892 and 2969/3608, MI300X 616/634 and 1182/1230. Other
  // GPUs without a figure keep the A100-derived 1305 / 1410.
  CHECK(sustained_clock_fraction(find_gpu("h100")) == doctest::Approx(0.888052).epsilon(1e-6));
  CHECK(sustained_clock_fraction(find_gpu("h200")) == doctest::Approx(0.888052).epsilon(1e-6));
  CHECK(sustained_clock_fraction(find_gpu("b200")) == doctest::Approx(0.830339).epsilon(1e-6));
  CHECK(sustained_clock_fraction(find_gpu("b300")) ==
        doctest::Approx(0.812874).epsilon(1e-5).scale(0));  // (0.802854 + 0.822894) / 2
  CHECK(sustained_clock_fraction(find_gpu("mi300x")) ==
        doctest::Approx(0.966292).epsilon(1e-5).scale(0));  // (0.971609 + 0.960976) / 2
  CHECK(sustained_clock_fraction(find_gpu("a100")) == doctest::Approx(1305.0 / 1410));
  CHECK(sustained_clock_fraction(find_gpu("h100-pcie")) == doctest::Approx(1305.0 / 1410));
  // The same die at a higher limit, no MSMF of its own: the measured board's sustained rates
  // x (P / P_measured)^(1/3) (the DVFS law of power caps) over the board's bursts. GB200
  // (1200 W) from the HGX B200 (1000 W): (1439 / 1822 + 2788 / 3615.6) / 2 x 1.062659 =
  // 0.829349; GB300 (1400 W) from the HGX B300 (1100 W), its bursts Blackwell's 0.776 / 0.763
  // of 2500 / 5000: (1519 / 1940 + 2969 / 3815) / 2 x 1.083725 = 0.845960.
  CHECK(sustained_clock_fraction(find_gpu("gb200")) ==
        doctest::Approx(0.829349).epsilon(1e-5).scale(0));
  CHECK(sustained_clock_fraction(find_gpu("gb300")) ==
        doctest::Approx(0.845960).epsilon(1e-5).scale(0));
  CHECK(sustained_clock_fraction(find_gpu("gb200")) < 1305.0 / 1410);
  // The B200's figure agrees with flashinfer PR #2899's attention kernels under the same
  // throttling (1450 -> 1237 TFLOP/s: 0.853) within 3 %.
  CHECK(sustained_clock_fraction(find_gpu("b200")) ==
        doctest::Approx(1237.0 / 1450).epsilon(0.03).scale(0));
  // Compute-bound kernels slow by the fraction, HBM-bound ones do not.
  GpuSpec boost = find_gpu("b200");
  boost.load_clock_fraction = 1;
  const DatasheetKernelModel sustained(find_gpu("b200")), unthrottled(boost);
  const KernelOp g = gemm(8192, 8192, 8192);
  CHECK(sustained.seconds(g, KernelPass::FORWARD, DType::FP8) - 4e-6 ==
        doctest::Approx((unthrottled.seconds(g, KernelPass::FORWARD, DType::FP8) - 4e-6) / 0.830339)
            .scale(0)
            .epsilon(1e-5));
}

TEST_CASE("topologies::DatasheetKernelModel: a 500 W H100 is slower than a 700 W one") {
  // Sustained clock (P / TDP)^(1/3) (dynamic power ∝ f·V², V ∝ f): 500 W of 700 W gives
  // (5/7)^(1/3) = 0.893904. Compute-bound kernels slow by that factor, HBM-bound ones not.
  // Both run below boost under load: 0.888052, the H200 SXM's MSMF / MAMF (same die, same
  // 700 W limit; gpu_catalog.cpp).
  GpuSpec capped = find_gpu("h100");
  capped.power_limit_watts = 500;
  CHECK(sustained_clock_fraction(capped) == doctest::Approx(0.888052 * 0.893904).epsilon(1e-6));
  const DatasheetKernelModel h700(find_gpu("h100")), h500(capped);
  const KernelOp big = gemm(8192, 8192, 8192);
  const double t700 = h700.seconds(big, KernelPass::FORWARD, DType::BF16) - 4e-6;
  const double t500 = h500.seconds(big, KernelPass::FORWARD, DType::BF16) - 4e-6;
  CHECK(t500 > t700);
  CHECK(t700 / t500 == doctest::Approx(0.893904).epsilon(1e-6));
  KernelOp attn;
  attn.kind = KernelKind::ATTENTION;
  attn.fused = true;
  attn.forward_flops = 1e12;
  CHECK((h700.seconds(attn, KernelPass::FORWARD, DType::BF16) - 4e-6) /
            (h500.seconds(attn, KernelPass::FORWARD, DType::BF16) - 4e-6) ==
        doctest::Approx(0.893904).epsilon(1e-6));
  KernelOp norm;
  norm.kind = KernelKind::MEMORY_BOUND;
  norm.bytes = 1e9;
  CHECK(h500.seconds(norm, KernelPass::FORWARD, DType::BF16) ==
        h700.seconds(norm, KernelPass::FORWARD, DType::BF16));
  // A limit at or above the TDP cannot clock past the load clock at the TDP.
  capped.power_limit_watts = 900;
  CHECK(sustained_clock_fraction(capped) == doctest::Approx(0.888052).epsilon(1e-6));
}

TEST_CASE("topologies::DatasheetKernelModel: under load a GPU runs at its sustained clock") {
  // NVIDIA's A100 HPL Rpeak clock: 1305 MHz sustained at the power limit vs 1410 MHz boost
  // (glennklockwood.com/garden/peak-FLOPS). A GEMM takes 1410/1305 of its boost-clock time;
  // a GPU JSON figure overrides it; HBM-bound kernels do not change.
  GpuSpec boost = find_gpu("a100");
  boost.load_clock_fraction = 1;
  GpuSpec slow = boost;
  slow.load_clock_fraction = 0.5;
  const DatasheetKernelModel loaded(find_gpu("a100")), at_boost(boost), half(slow);
  const KernelOp big = gemm(8192, 8192, 8192);
  const double t_boost = at_boost.seconds(big, KernelPass::FORWARD, DType::BF16) - 4e-6;
  CHECK(loaded.seconds(big, KernelPass::FORWARD, DType::BF16) - 4e-6 ==
        doctest::Approx(t_boost * 1410 / 1305).epsilon(1e-9));
  CHECK(half.seconds(big, KernelPass::FORWARD, DType::BF16) - 4e-6 ==
        doctest::Approx(2 * t_boost).epsilon(1e-9));
  KernelOp norm;
  norm.kind = KernelKind::MEMORY_BOUND;
  norm.bytes = 1e9;
  CHECK(loaded.seconds(norm, KernelPass::FORWARD, DType::BF16) ==
        at_boost.seconds(norm, KernelPass::FORWARD, DType::BF16));
}

TEST_CASE("topologies::DatasheetKernelModel: FP8 casts per recipe, by hand") {
  // A [4096 x 4096]·[4096 x 8192] FP8 GEMM on H100 (delayed scaling): forward casts the
  // input (4096 x 4096) and the weight (4096 x 8192) at 4 B per element (read bf16, write
  // FP8 and its transpose), backward the output gradient (4096 x 8192). At 0.80 x 3.35 TB/s
  // = 2.68e12 B/s: 4 x 16777216 / 2.68e12 = 25.041 us + 4; 4 x 33554432 / 2.68e12 = 50.081
  // us + 4. Forward 83.122 us, backward 54.081 us.
  CHECK(default_fp8_recipe(GpuArch::HOPPER) == Fp8Recipe::DELAYED);
  CHECK(default_fp8_recipe(GpuArch::BLACKWELL) == Fp8Recipe::MXFP8);
  const DatasheetKernelModel h100(find_gpu("h100"));
  KernelOp cast = gemm(4096, 8192, 4096);
  cast.kind = KernelKind::FP8_CAST;
  CHECK(h100.seconds(cast, KernelPass::FORWARD, DType::FP8) ==
        doctest::Approx(83.122e-6).epsilon(1e-4).scale(0));
  CHECK(h100.seconds(cast, KernelPass::BACKWARD_INPUT, DType::FP8) ==
        doctest::Approx(54.081e-6).epsilon(1e-4).scale(0));
  CHECK(h100.seconds(cast, KernelPass::BACKWARD_WEIGHT, DType::FP8) == 0);
  // Current (tensorwise) scaling reads each tensor once more for its amax: 6 B per element.
  cast.fp8_recipe = Fp8Recipe::TENSORWISE;
  CHECK(h100.seconds(cast, KernelPass::BACKWARD_INPUT, DType::FP8) ==
        doctest::Approx(6 * 33554432 / 2.68e12 + 4e-6).epsilon(1e-6).scale(0));
  CHECK(fp8_cast_bytes_per_element(Fp8Recipe::MXFP8, false) == 4 + 2.0 / 32);
}

TEST_CASE("topologies::fp8_cast_bytes_per_element: each recipe's quantisation, by hand") {
  // Per-tensor recipes write a transpose only where FP8 GEMMs are TN-only (Hopper): delayed
  // reads 2 B and writes 1 (+1); tensorwise reads once more for the amax (+2).
  CHECK(fp8_gemm_tn_only(GpuArch::HOPPER));
  CHECK(fp8_gemm_tn_only(GpuArch::ADA));
  CHECK_FALSE(fp8_gemm_tn_only(GpuArch::BLACKWELL));
  CHECK(fp8_cast_bytes_per_element(Fp8Recipe::DELAYED, true) == 4);
  CHECK(fp8_cast_bytes_per_element(Fp8Recipe::DELAYED, false) == 3);
  CHECK(fp8_cast_bytes_per_element(Fp8Recipe::TENSORWISE, true) == 6);
  CHECK(fp8_cast_bytes_per_element(Fp8Recipe::TENSORWISE, false) == 5);
  // Block recipes write the row- and column-wise copies everywhere, plus their scales: fp32
  // per 128 elements (blockwise), E8M0 per 32 (MXFP8).
  CHECK(fp8_cast_bytes_per_element(Fp8Recipe::BLOCKWISE, true) == 4 + 8.0 / 128);
  CHECK(fp8_cast_bytes_per_element(Fp8Recipe::BLOCKWISE, false) == 4 + 8.0 / 128);
  CHECK(fp8_cast_bytes_per_element(Fp8Recipe::MXFP8, false) == 4 + 2.0 / 32);
  // MXFP8 needs Blackwell's block-scaled tensor cores; the others run wherever FP8 does.
  CHECK(fp8_recipe_supported(Fp8Recipe::MXFP8, GpuArch::BLACKWELL));
  CHECK_FALSE(fp8_recipe_supported(Fp8Recipe::MXFP8, GpuArch::HOPPER));
  CHECK(fp8_recipe_supported(Fp8Recipe::BLOCKWISE, GpuArch::HOPPER));
  CHECK(fp8_recipe_supported(Fp8Recipe::TENSORWISE, GpuArch::HOPPER));
}

TEST_CASE("topologies::DatasheetKernelModel: a KernelOp's FP8 recipe sets its casts on B200") {
  // Output-gradient cast of a [4096 x 8192] FP8 GEMM output on B200 (8 TB/s x 0.80 = 6.4e12
  // B/s): MXFP8 by default (4.0625 B per element), tensorwise 5 B (no transpose on
  // Blackwell), delayed 3 B. The GEMM itself is timed the same under every recipe.
  const DatasheetKernelModel b200(find_gpu("b200"));
  KernelOp cast = gemm(4096, 8192, 4096);
  cast.kind = KernelKind::FP8_CAST;
  const double elements = 4096.0 * 8192;
  const double bw = find_gpu("b200").hbm_bandwidth_Bps * 0.80;
  CHECK(b200.seconds(cast, KernelPass::BACKWARD_INPUT, DType::FP8) ==
        doctest::Approx(4.0625 * elements / bw + 4e-6).epsilon(1e-9));
  cast.fp8_recipe = Fp8Recipe::TENSORWISE;
  CHECK(b200.seconds(cast, KernelPass::BACKWARD_INPUT, DType::FP8) ==
        doctest::Approx(5 * elements / bw + 4e-6).epsilon(1e-9));
  cast.fp8_recipe = Fp8Recipe::DELAYED;
  CHECK(b200.seconds(cast, KernelPass::BACKWARD_INPUT, DType::FP8) ==
        doctest::Approx(3 * elements / bw + 4e-6).epsilon(1e-9));
  KernelOp g = gemm(4096, 8192, 4096);
  const double mx = b200.seconds(g, KernelPass::FORWARD, DType::FP8);
  g.fp8_recipe = Fp8Recipe::TENSORWISE;
  CHECK(b200.seconds(g, KernelPass::FORWARD, DType::FP8) == mx);
}

TEST_CASE("topologies::DatasheetKernelModel: block-scale swizzles before each GEMM, by hand") {
  // MXFP8 [4096 x 8192]·[8192 x 4096]... here m 4096, n 8192, k 4096 in 16 groups (a grouped
  // GEMM) on B200 (6.4e12 B/s at 0.80). With swizzle_scales each group's GEMM first swizzles
  // its two operands' E8M0 scales (read and write, 2/32 B per element) in a kernel each:
  // forward input [m x k] and weight [k x n], backward dY [m x n] twice, W [k x n], X [m x k].
  const DatasheetKernelModel b200(find_gpu("b200"));
  const double bw = find_gpu("b200").hbm_bandwidth_Bps * 0.80;
  KernelOp cast = gemm(4096, 8192, 4096);
  cast.kind = KernelKind::FP8_CAST;
  cast.batch = 16;
  cast.fp8_recipe = Fp8Recipe::MXFP8;
  const double fwd = b200.seconds(cast, KernelPass::FORWARD, DType::FP8);
  const double bwd = b200.seconds(cast, KernelPass::BACKWARD_INPUT, DType::FP8);
  CHECK(block_scale_swizzles(cast, KernelPass::FORWARD, DType::FP8) == 0);
  const double launches_fwd = kernel_launches(cast, KernelPass::FORWARD, DType::FP8);
  cast.swizzle_scales = true;
  const auto swizzle = [&](double elements) { return 2.0 / 32 * elements / bw + 4e-6; };
  const double mk = 4096.0 * 4096, kn = 4096.0 * 8192, mn = 4096.0 * 8192;
  CHECK(b200.seconds(cast, KernelPass::FORWARD, DType::FP8) ==
        doctest::Approx(fwd + 16 * (swizzle(mk) + swizzle(kn))).epsilon(1e-9));
  CHECK(b200.seconds(cast, KernelPass::BACKWARD_INPUT, DType::FP8) ==
        doctest::Approx(bwd + 16 * (2 * swizzle(mn) + swizzle(kn) + swizzle(mk))).epsilon(1e-9));
  CHECK(block_scale_swizzles(cast, KernelPass::FORWARD, DType::FP8) == 32);
  CHECK(block_scale_swizzles(cast, KernelPass::BACKWARD_INPUT, DType::FP8) == 64);
  CHECK(kernel_launches(cast, KernelPass::FORWARD, DType::FP8) == launches_fwd + 32);
  // Per-tensor scales have nothing to swizzle; NVFP4 swizzles its E4M3 scales per 16.
  cast.fp8_recipe = Fp8Recipe::TENSORWISE;
  CHECK(block_scale_swizzles(cast, KernelPass::BACKWARD_INPUT, DType::FP8) == 0);
  CHECK(block_scale_swizzles(cast, KernelPass::BACKWARD_INPUT, DType::FP4) == 64);
  CHECK(block_scale_swizzles(cast, KernelPass::BACKWARD_WEIGHT, DType::FP4) == 0);
}

TEST_CASE("topologies::attention_shape_factor: FlashAttention-3 curves by sequence and head dim") {
  // Reference (causal, head dim 128, 4096 square) is 1; unknown lengths keep the reference.
  CHECK(attention_shape_factor(4096, 4096, 128, true) == doctest::Approx(1.0));
  CHECK(attention_shape_factor(0, 4096, 128, true) == 1.0);
  // By hand: no mask at 2048 visits 2048 keys per query tile (2048/2248 x 128/176); the
  // causal 4096 reference visits 2048 on average and computes a half-masked diagonal tile
  // (x 2048/2112): the ratio is 2112/2048.
  CHECK(attention_shape_factor(2048, 2048, 128, false) == doctest::Approx(2112.0 / 2048));
  // FlashAttention-3, H100, BF16 (Shah et al. 2024, Fig. 5), relative to head dim 128 with
  // no mask at 16k (648 TFLOP/s): no mask 512 = 467, causal 512 = 292, causal 4k = 579,
  // causal 16k = 616; head dim 64 at 16k = 497, head dim 256 up to 740 (abstract).
  const double top = attention_shape_factor(16384, 16384, 128, false);
  CHECK(attention_shape_factor(512, 512, 128, false) / top ==
        doctest::Approx(467.0 / 648).epsilon(0.02));
  CHECK(attention_shape_factor(512, 512, 128, true) / top ==
        doctest::Approx(292.0 / 648).epsilon(0.03));
  CHECK(attention_shape_factor(4096, 4096, 128, true) / top ==
        doctest::Approx(579.0 / 648).epsilon(0.03));
  CHECK(attention_shape_factor(16384, 16384, 128, true) / top ==
        doctest::Approx(616.0 / 648).epsilon(0.04));
  CHECK(attention_shape_factor(16384, 16384, 64, false) / top ==
        doctest::Approx(497.0 / 648).epsilon(0.03));
  CHECK(attention_shape_factor(16384, 16384, 256, false) / top ==
        doctest::Approx(740.0 / 648).epsilon(0.03));
  // Short sequences reach less; causal reaches less than unmasked at the same length.
  CHECK(attention_shape_factor(1024, 1024, 128, true) <
        attention_shape_factor(8192, 8192, 128, true));
  CHECK(attention_shape_factor(1024, 1024, 128, true) <
        attention_shape_factor(1024, 1024, 128, false));
}

TEST_CASE("topologies::attention_shape_factor: a sliding window visits its window, by hand") {
  // Causal 4096 square, window 128 (GPT-OSS): a query tile visits 128 - 128 x 127 / 8192 =
  // 126.02 keys on average and computes the half-masked diagonal tile and, on the
  // (4096 - 128) / 4096 of rows past the first window, a half-masked tile at the window's
  // edge: 126.02 / (126.02 + 200) x 126.02 / (126.02 + 128 x (0.5 + 0.5 x 3968 / 4096)) x
  // 128 / 176 over the reference (2048 / 2248 x 2048 / 2112 x 128 / 176).
  const double mean = 128 - 128.0 * 127 / 8192;
  const double tiles = 0.5 + 0.5 * 3968.0 / 4096;
  const double expected =
      (mean / (mean + 200) * mean / (mean + 128 * tiles)) / (2048.0 / 2248 * 2048.0 / 2112);
  CHECK(attention_shape_factor(4096, 4096, 128, true, {}, 128) == doctest::Approx(expected));
  // A window at least the sequence is full attention.
  CHECK(attention_shape_factor(4096, 4096, 128, true, {}, 4096) ==
        doctest::Approx(attention_shape_factor(4096, 4096, 128, true)));
  CHECK(attention_shape_factor(4096, 4096, 128, true, {}, 128) <
        attention_shape_factor(512, 512, 128, true));
  // Continuous as the window approaches the sequence.
  CHECK(attention_shape_factor(4096, 4096, 128, true, {}, 4095) ==
        doctest::Approx(attention_shape_factor(4096, 4096, 128, true)).epsilon(1e-3));
}

TEST_CASE("topologies::DatasheetKernelModel: unfused attention computes the whole square") {
  // Unfused (batched GEMMs, masked afterwards) attention saves nothing from a window: a
  // 128-key window's counted FLOPs (2 x 128 - 128 x 127 / 4096 keys per row) run as 4096.
  const DatasheetKernelModel h100(find_gpu("h100"));
  KernelOp op = attention(false, true, 0);
  op.m = op.n = 4096;
  op.k = 128;
  op.batch = 64;
  op.seq_q = op.seq_kv = 4096;
  const double full = 2.0 * 64 * 4096 * 4096 * 128;
  op.forward_flops = full;
  const double square = h100.seconds(op, KernelPass::FORWARD, DType::BF16);
  op.window = 128;
  op.forward_flops = full * (2 * 128 - 128.0 * 127 / 4096) / 4096;
  CHECK(h100.seconds(op, KernelPass::FORWARD, DType::BF16) == doctest::Approx(square).scale(0));
}

TEST_CASE("topologies::DatasheetKernelModel: ring attention runs cp chunk kernels, by hand") {
  // s = 8192, cp = 4: each rank holds c = 2048 queries and runs 4 kernels per pass. Causal
  // forward of 1e12 counted FLOPs = 0.5e12 computed, at H100 518/989 x 989.4e12 x 0.888052
  // (its sustained share, gpu_catalog.cpp) = 460.20 TFLOP/s times each kernel's shape factor
  // (no mask, head dim 128):
  //   diagonal, causal 2048 square, 1/4 of the work: factor (1024/1224 x 1024/1088) /
  //     (2048/2248 x 2048/2112) = 0.891292 -> 0.125e12 / (460.20e12 x 0.891292) = 304.75 us
  //   3 steps of c x c/2, half with 1024 keys (factor 2048 x 1024/1224 / (2048/2248 x 2048/
  //     2112 x 2048)... = 0.946998), half with 2048 keys (1.03125): 0.1875e12 each ->
  //     430.23 + 395.09 us; plus 4 kernel overheads of 4 us: 1146.07 us.
  DatasheetKernelModel h100(find_gpu("h100"));
  KernelOp op = attention(true, true, 1e12);
  op.seq_q = 2048;
  op.seq_kv = 8192;
  op.head_dim = 128;
  op.cp_ring = 4;
  CHECK(h100.seconds(op, KernelPass::FORWARD, DType::BF16) ==
        doctest::Approx(1146.07e-6).epsilon(1e-4).scale(0));
  // Without CP the same work is one causal 8192 square kernel: 1026.43 us;
  // the short chunks of the ring make attention slower.
  KernelOp whole = op;
  whole.seq_q = 8192;
  whole.cp_ring = 1;
  CHECK(h100.seconds(whole, KernelPass::FORWARD, DType::BF16) ==
        doctest::Approx(1026.43e-6).epsilon(1e-4).scale(0));
  // Unmasked with CP: 4 kernels of c x c (factor 1.03125): 1e12 / (460.20e12 x 1.03125)
  // + 16 us = 2123.13 us.
  op.causal = false;
  CHECK(h100.seconds(op, KernelPass::FORWARD, DType::BF16) ==
        doctest::Approx(2123.13e-6).epsilon(1e-4).scale(0));
}

TEST_CASE(
    "topologies::DatasheetKernelModel: FlashAttention-2 is slower than cuDNN on Hopper only") {
  // FlashAttention-3 is "1.5-2.0x faster than FlashAttention-2" on H100 (Shah et al. 2024,
  // abstract): FA2 runs at 579/1.75 TFLOP/s against the vendor (cuDNN) kernel's 518 at the
  // reference shape (Fig. 5), 518 x 1.75 / 579 = 1.566x slower; on A100 FA2 is the
  // reference kernel (Dao 2023), so nothing changes there.
  KernelOp op = attention(true, false, 1e12);
  for (const char* name : {"h100", "a100"}) {
    const DatasheetKernelModel gpu(find_gpu(name));
    const double vendor = gpu.seconds(op, KernelPass::FORWARD, DType::BF16) - 4e-6;
    op.kernel = AttentionKernel::FA2;
    const double fa2 = gpu.seconds(op, KernelPass::FORWARD, DType::BF16) - 4e-6;
    op.kernel = AttentionKernel::VENDOR;
    CHECK(fa2 / vendor ==
          doctest::Approx(std::string(name) == "h100" ? 518.0 * 1.75 / 579.0 : 1.0));
  }
}

TEST_CASE("topologies::DatasheetKernelModel: a grouped GEMM pays one launch per group") {
  // Transformer Engine's GroupedLinear launches one cuBLAS GEMM per expert
  // (nvte_multi_stream_cublas_gemm, transformer_engine/common/gemm/cublaslt_gemm.cu), so 16
  // experts cost 15 kernel overheads (4 us each) more than one batched kernel of the same
  // tiles, in every pass; the FLOP time is the same.
  // 128 x 4736 x 4736: every pass's output is 37 or 37 x 37 tiles a group, so the 4 groups in
  // flight and the 16 of one batched kernel both fill B200's 148 SMs in whole waves: the FLOP
  // time is the same.
  DatasheetKernelModel b200(find_gpu("b200"));
  KernelOp batched = gemm(128, 4736, 4736);
  batched.batch = 16;
  batched.forward_flops *= 16;
  batched.backward_input_flops *= 16;
  batched.backward_weight_flops *= 16;
  KernelOp grouped = batched;
  grouped.per_group_kernels = true;
  for (KernelPass pass :
       {KernelPass::FORWARD, KernelPass::BACKWARD_INPUT, KernelPass::BACKWARD_WEIGHT}) {
    CHECK(b200.seconds(grouped, pass, DType::FP8) - b200.seconds(batched, pass, DType::FP8) ==
          doctest::Approx(15 * 4e-6).epsilon(1e-9));
  }
  // From a CUDA graph each of the 16 launches saves 0.4 us (one for the batched kernel).
  grouped.graphed = batched.graphed = true;
  CHECK(b200.seconds(grouped, KernelPass::FORWARD, DType::FP8) -
            b200.seconds(batched, KernelPass::FORWARD, DType::FP8) ==
        doctest::Approx(15 * 4e-6 - 15 * 0.4e-6).epsilon(1e-9));
  // One group is one kernel either way.
  KernelOp single = gemm(1024, 1536, 2048);
  KernelOp single_grouped = single;
  single_grouped.per_group_kernels = true;
  CHECK(b200.seconds(single_grouped, KernelPass::FORWARD, DType::BF16) ==
        b200.seconds(single, KernelPass::FORWARD, DType::BF16));
}

TEST_CASE("topologies::DatasheetKernelModel: a grouped GEMM's waves pool only its 4 streams") {
  // TE deals the per-group GEMMs over 4 streams (TE_GROUPED_GEMM_STREAMS), so only 4 groups'
  // tiles share the SMs at once. H100 (132 SMs), 16 groups of 512 x 1536 (4 x 12 = 48 tiles):
  // one batched kernel deals 768 tiles in 6 waves (768 / 792 = 0.969697 busy); 4 groups in
  // flight deal 192 in 2 (192 / 264 = 0.727273). The FLOP time grows by 0.969697 / 0.727273 =
  // 4 / 3 beyond the 15 extra launches' overhead (4 us each, as above).
  DatasheetKernelModel h100(find_gpu("h100-sxm"));
  KernelOp batched = gemm(512, 1536, 2048);
  batched.batch = 16;
  batched.forward_flops *= 16;
  KernelOp grouped = batched;
  grouped.per_group_kernels = true;
  CHECK(concurrent_groups(batched) == 16);
  CHECK(concurrent_groups(grouped) == 4);
  const double b = h100.seconds(batched, KernelPass::FORWARD, DType::BF16) - 4e-6;
  const double g = h100.seconds(grouped, KernelPass::FORWARD, DType::BF16) - 16 * 4e-6;
  CHECK(g / b == doctest::Approx(4.0 / 3.0).epsilon(1e-9));
  // Fewer groups than streams run all at once.
  grouped.batch = 3;
  CHECK(concurrent_groups(grouped) == 3);
}

TEST_CASE("topologies::DatasheetKernelModel: NVFP4 GEMMs at the FP4 peak, casts by hand") {
  // B200 (HGX, 1000 W): dense FP8 4,500 and FP4 9,000 TFLOP/s (reference gpus.json, NVIDIA
  // Blackwell datasheet). No published FP4 GEMM sweep: FP4 runs at the FP8 fraction, so an
  // 8192^3 GEMM's FLOP time halves (the 4 us launch overhead does not).
  const DatasheetKernelModel b200(find_gpu("b200"));
  CHECK(b200.peak_flops(DType::FP4) == doctest::Approx(9000e12));
  const KernelOp g = gemm(8192, 8192, 8192);
  const double t8 = b200.seconds(g, KernelPass::FORWARD, DType::FP8) - 4e-6;
  const double t4 = b200.seconds(g, KernelPass::FORWARD, DType::FP4) - 4e-6;
  CHECK(t4 == doctest::Approx(t8 / 2).epsilon(1e-9));
  // A GPU without FP4 tensor cores (H100) runs FP4 math at its FP8 rate.
  const DatasheetKernelModel h100(find_gpu("h100"));
  CHECK(h100.peak_flops(DType::FP4) == doctest::Approx(h100.peak_flops(DType::FP8)));
  // A GPU with its own measured fractions (GB200: bf16 1822 / 2500 = 0.729, fp8 3615.6 / 5000
  // = 0.723, docs/defaults.md) runs FP4 at its FP8 one, not the bf16/TF32 one.
  const DatasheetKernelModel gb200(find_gpu("gb200"));
  CHECK(gb200.gemm_fraction(DType::FP4) == gb200.gemm_fraction(DType::FP8));
  CHECK(gb200.gemm_fraction(DType::FP4) != gb200.gemm_fraction(DType::BF16));
  // The NVFP4 cast of the output gradient [4096 x 8192] moves 2 (amax read) + 2 (read) +
  // 2 x (0.5 + 1/16) (row- and column-wise E2M1 with an E4M3 scale per 16) = 5.125 B per
  // element at 0.80 x 8 TB/s = 6.4e12 B/s: 5.125 x 33554432 / 6.4e12 = 26.870 us + 4 us.
  KernelOp cast = gemm(4096, 8192, 4096);
  cast.kind = KernelKind::FP8_CAST;
  CHECK(b200.seconds(cast, KernelPass::BACKWARD_INPUT, DType::FP4) ==
        doctest::Approx(5.125 * 33554432 / 6.4e12 + 4e-6).epsilon(1e-6).scale(0));
}
