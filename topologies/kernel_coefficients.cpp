// Published per-architecture coefficients of the kernel-time model (kernel_model.hpp): the
// large-GEMM fractions, the mid-size GEMM law, and fused attention's reference fractions and
// sequence shape, each with the measurement it comes from. Declared in kernel_model.hpp.
#include "topologies/kernel_model.hpp"

#include <algorithm>

#include "common/sliding_window.hpp"

namespace loom::topo {

// Large-GEMM fractions of the dense datasheet peak: the "Maximum Achievable Matmul FLOPS"
// (MAMF, best shape of a sweep, mean of 100 runs, torch.matmul on cuBLAS/hipBLASLt at the
// card's stock power) of S. Bekman, "Machine Learning Engineering", compute/accelerator/
// README.md, MAMF comparison tables (BF16 and FP8 float8_e4m3fn), 2025 revision:
//   A100 SXM bf16 271.2 / 312 = 86.9%;  H100 SXM bf16 794.5 / 989 = 80.3% (H200 the same),
//   fp8 1402.6 / 1979 = 70.9%;  B200 bf16 1745 / 2250 = 77.6%, fp8 3432.5 / 4500 = 76.3%;
//   MI300X bf16 668.4 / 1300 = 51.4%.
// No published MAMF for Volta, Ada or TF32: those keep the earlier 0.80 (Volta, Ada) or the
// same architecture's bf16 figure (TF32 and FP16 run on the same tensor-core datapath at
// half and equal rate); MI300X fp8 has no figure and uses its bf16 one.
// FP4: no published MAMF or cuBLASLt sweep of NVFP4 GEMMs was found; the FP8 fraction of
// the same architecture is used (both run on the same 5th-generation tensor cores with
// hardware block scaling).
double architecture_gemm_fraction(GpuArch arch, DType tensor) {
  const bool fp8 = tensor == DType::FP8 || tensor == DType::FP4;
  switch (arch) {
    case GpuArch::AMPERE:
      return 0.869;  // no fp8 tensor cores: fp8 math falls back to bf16 peak and fraction
    case GpuArch::HOPPER:
      return fp8 ? 0.709 : 0.803;
    case GpuArch::BLACKWELL:
      return fp8 ? 0.763 : 0.776;
    case GpuArch::CDNA3:
      return 0.514;
    case GpuArch::VOLTA:
    case GpuArch::ADA:
      break;
  }
  return 0.80;
}

// Fused attention forward, fraction of the dense 16-bit peak at the reference shape (causal,
// head dim 128, 4096 tokens; attention_shape_factor scales it to other shapes), with the
// causal half skipped and counted as skipped (the FlashAttention benchmarks' convention):
//  - Ampere: FlashAttention-2 reaches 50-73% of A100 peak forward (Dao 2023, abstract and
//    Fig. 4); 0.55 for causal head-dim 64-128 at 2k-8k, the lower part of that range.
//  - Hopper: the vendor kernel is cuDNN's fused attention: Transformer Engine disables
//    FlashAttention "to give FusedAttention preference on Hopper+ for performance reasons"
//    (transformer_engine/pytorch/attention get_attention_backend). cuDNN forward, head dim
//    128, causal, 4k tokens: 518 TFLOP/s of 989 = 0.524 (Shah et al. 2024, FlashAttention-3,
//    Fig. 5, where FlashAttention-3 reaches 579).
//  - Blackwell: cuDNN 9.18 (backend 91801) on GB200, BF16, causal, head dim 128, batch 1,
//    64 query / 8 key-value heads, 4096 tokens: 1297 TFLOP/s forward of the 2500 dense peak
//    = 0.519 (backward 1105, 0.85 of it; the FA2-era 0.8 is kept for every architecture:
//    cuDNN on Hopper runs 0.76, Megatron-Core MoE report, arXiv:2603.07685, Table 9). NVIDIA
//    cudnn-frontend benchmark/sdpa_benchmark_training/results/gb200_918_only_cudnn/
//    llama3.1_20260126_110503.csv, January 2026: the 26.02 containers' time, the middle of
//    the Megatron-Bridge releases scored (25.09 to 26.04); cuDNN 9.22 in April reached 1408
//    (results/llama3.1/gb200/llama3.1_20260424_100750.csv). Blackwell Ultra (B300) doubles
//    the exponent units' throughput and has figures of its own (gpu_catalog.cpp).
//  - Others: the Ampere figure.
double architecture_attention_fraction(GpuArch arch) {
  switch (arch) {
    case GpuArch::HOPPER:
      return 518.0 / 989.0;  // cuDNN, FlashAttention-3 paper Fig. 5 (see above)
    case GpuArch::BLACKWELL:
      return 1297.0 / 2500.0;  // cuDNN 9.18 on GB200 (see above)
    case GpuArch::VOLTA:
    case GpuArch::AMPERE:
    case GpuArch::ADA:
    case GpuArch::CDNA3:
      break;
  }
  return 0.55;
}

namespace {

// Unnormalised throughput of a fused attention kernel (see attention_shape_factor).
double attention_shape_raw(double seq_q, double seq_kv, double head_dim, bool causal,
                           const AttentionShapeModel& m, double window) {
  // Mean keys a query tile visits: all of them, or under the bottom-right aligned causal
  // mask seq_kv - seq_q / 2; each query tile also computes one diagonal tile whole, of
  // which half is masked. A causal sliding window of w keys (w < seq_q) visits
  // w - w (w - 1) / (2 seq_q) on average and, on the (seq_q - w) / seq_q of rows whose window
  // has a far edge, computes a second half-masked tile there.
  double mean = causal ? seq_kv - std::min(seq_q, seq_kv) / 2 : seq_kv;
  double masked_tiles = causal ? 0.5 : 0.0;
  if (causal && windowed(seq_q, window)) {
    mean = std::min(mean, windowed_causal_keys(seq_q, window) / 2);
    masked_tiles += 0.5 * (seq_q - window) / seq_q;  // rows past the window's first w
  }
  const double useful = causal ? mean / (mean + m.kv_tile * masked_tiles) : 1.0;
  return mean / (mean + m.half_kv_tokens) * useful * head_dim / (head_dim + m.half_head_dim);
}

}  // namespace

// FlashAttention-3 forward, BF16, H100 SXM5 (Shah et al. 2024, Fig. 5; batch x seqlen =
// 16k tokens, 2048 hidden), TFLOP/s at 512 / 1k / 2k / 4k / 8k / 16k:
//   head dim 128, no mask:  467, 565, 625, 638, 646, 648
//   head dim 128, causal:   292, 423, 521, 579, 602, 616
//   head dim 64,  no mask:  333, 392, 460, 476, 496, 497;  head dim 256 up to 740 (abstract)
// half_kv_tokens = 200 solves 467/648 = [512/(512+L)] / [16384/(16384+L)] (no mask); with
// it the causal row follows with no further constant: mean keys s/2 and the half-masked
// diagonal tile give 290, 415, 514, 578, 615, 635 (within 3%). half_head_dim = 48 lies
// between the d0 that 497/648 (hd 64 vs 128: 56) and 740/648 (256 vs 128: 42) give for a
// d / (d + d0) law. Only the shape is taken from these; each architecture keeps its own
// reference fraction (and Blackwell its own half_kv_tokens: architecture_attention_shape).
double attention_shape_factor(std::int64_t seq_q, std::int64_t seq_kv, std::int64_t head_dim,
                              bool causal, const AttentionShapeModel& shape, std::int64_t window) {
  if (seq_q <= 0 || seq_kv <= 0 || head_dim <= 0) return 1.0;
  const double reference = attention_shape_raw(4096, 4096, 128, true, shape, 0);
  return attention_shape_raw(static_cast<double>(seq_q), static_cast<double>(seq_kv),
                             static_cast<double>(head_dim), causal, shape,
                             static_cast<double>(window)) /
         reference;
}

// Blackwell's cuDNN forward on GB200 (the reference-fraction file above, cuDNN 9.18),
// TFLOP/s at 2k / 4k / 8k / 16k / 32k tokens, head dim 128:
//   causal:   1022, 1297, 1563, 1646, 1686;   no mask: 1232, 1569, 1675, 1746, 1756.
// Tensor-core throughput doubled over Hopper while the exponent units and shared memory did
// not (Zadouri et al., "FlashAttention-4", arXiv:2603.05451, abstract), so the per-tile
// fixed work weighs more: a least-squares fit of the law above to the ten points (log
// error) gives half_kv_tokens = 730, within 8% of every point (3.1% rms); Hopper's 200 would
// put 2k at 0.89 of 4k, where cuDNN reaches 0.79. The head-dim and tile constants keep
// their defaults (no Blackwell sweep over head dims was found).
AttentionShapeModel architecture_attention_shape(GpuArch arch) {
  AttentionShapeModel m;
  if (arch == GpuArch::BLACKWELL) m.half_kv_tokens = 730;
  return m;
}

// Mid-size GEMMs: the per-dimension law x / (x + h) of matmul_efficiency, with the large-GEMM
// fraction, wave quantisation and the 4 us kernel overhead as the model applies them,
// fitted (least squares on log TFLOP/s) to XLA's measured GEMM table (openxla/xla
// xla/service/gpu/model/default_matmul_perf_table.txtpb @336bb15c, batch 1, m, n, k each
// 256..4096): the table's 53 GEMMs of 2^32 FLOPs or more (smaller ones are latency-bound and
// the law does not hold there; training GEMMs are larger):
//   sm_90 (H100) bf16: h = 125, 9.9% rms (4096^3 780 TFLOP/s, 2048 x 512 x 2048 354);
//   sm_100 (B200) bf16: h = 270, 9.4% rms (4096^3 1417, 2048^3 986);
//   sm_100 (B200) fp8 e4m3: h = 435, 11.5% rms (4096^3 2765, 2048^3 1428).
// Faster tensor cores lose more to the per-tile fixed work (prologue, epilogue, pipeline
// fill), so the dimension at which a GEMM reaches half speed grows with the rate per SM. The
// table's sm_90 fp8 rows exceed H100's dense FP8 peak (2424 of 1979 TFLOP/s at 4096^3) and
// are not used: Hopper fp8 takes its bf16 figure times Blackwell's fp8 / bf16 ratio (435 /
// 270), 200. FP4 takes the FP8 figure (no sweep), tf32 / fp16 the bf16 one; architectures
// without a published sweep keep the earlier 48.
double architecture_matmul_half_dim(GpuArch arch, DType tensor) {
  const bool fp8 = tensor == DType::FP8 || tensor == DType::FP4;
  switch (arch) {
    case GpuArch::HOPPER:
      return fp8 ? 200 : 125;
    case GpuArch::BLACKWELL:
      return fp8 ? 435 : 270;
    case GpuArch::VOLTA:
    case GpuArch::AMPERE:
    case GpuArch::ADA:
    case GpuArch::CDNA3:
      break;
  }
  return 48;
}

}  // namespace loom::topo
