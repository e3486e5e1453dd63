#include "topologies/kernel_model.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "common/error.hpp"

namespace loom::topo {

PassSeconds KernelTimeModel::pass_seconds(const KernelOp& op, DType math) const {
  PassSeconds s;
  s.forward = seconds(op, KernelPass::FORWARD, math);
  s.backward_input = seconds(op, KernelPass::BACKWARD_INPUT, math);
  s.backward_weight = seconds(op, KernelPass::BACKWARD_WEIGHT, math);
  return s;
}

DType tensor_core_dtype(DType math) {
  return math == DType::FP32 ? DType::TF32 : math;
}

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
                           const AttentionShapeModel& m) {
  // Mean keys a query tile visits: all of them, or under the bottom-right aligned causal
  // mask seq_kv - seq_q / 2; each query tile also computes one diagonal tile whole, of
  // which half is masked.
  const double mean = causal ? seq_kv - std::min(seq_q, seq_kv) / 2 : seq_kv;
  const double useful = causal ? mean / (mean + m.kv_tile / 2) : 1.0;
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
                              bool causal, const AttentionShapeModel& shape) {
  if (seq_q <= 0 || seq_kv <= 0 || head_dim <= 0) return 1.0;
  const double reference = attention_shape_raw(4096, 4096, 128, true, shape);
  return attention_shape_raw(static_cast<double>(seq_q), static_cast<double>(seq_kv),
                             static_cast<double>(head_dim), causal, shape) /
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

double sustained_clock_fraction(const GpuSpec& gpu) {
  // Dynamic CMOS power is C·V²·f and DVFS lowers V with f (V ∝ f over the operating range),
  // so power ∝ f³ and the clock a cap sustains is f_TDP · (P / TDP)^(1/3): the standard DVFS
  // approximation (as in Mittal & Vetter, "A survey of methods for analyzing and improving
  // GPU energy efficiency", ACM Comput. Surv. 47(2), 2014). The measured peaks and fractions
  // hold at the TDP, so only a limit below it slows compute; a higher limit cannot clock
  // past the boost clock the datasheet peak assumes.
  // Under continuous load even at the TDP the clock sits below boost (load_clock_fraction).
  const double at_tdp =
      gpu.load_clock_fraction > 0 ? gpu.load_clock_fraction : DEFAULT_LOAD_CLOCK_FRACTION;
  if (gpu.power_limit_watts <= 0 || gpu.tdp_watts <= 0) return at_tdp;
  return at_tdp * std::min(1.0, std::cbrt(gpu.power_limit_watts / gpu.tdp_watts));
}

Fp8Recipe default_fp8_recipe(GpuArch arch) {
  // Megatron-Bridge and NeMo run MXFP8 on Blackwell (the only FP8 block format its tensor
  // cores scale in hardware) and Transformer Engine's DelayedScaling default on Hopper/Ada.
  return arch == GpuArch::BLACKWELL ? Fp8Recipe::MXFP8 : Fp8Recipe::DELAYED;
}

bool fp8_gemm_tn_only(GpuArch arch) {
  return arch != GpuArch::BLACKWELL;
}

bool fp8_recipe_supported(Fp8Recipe recipe, GpuArch arch) {
  // Transformer Engine check_mxfp8_support: "Device compute capability 10.0 or higher
  // required for MXFP8 execution" (transformer_engine/pytorch/fp8.py); its FP8 block scaling
  // check: "FP8 block scaled GEMM requires compute capability 9.0 or higher and CUDA >= 12.9"
  // (Ada, 8.9, runs only the per-tensor recipes).
  switch (recipe) {
    case Fp8Recipe::MXFP8:
      return arch == GpuArch::BLACKWELL;
    case Fp8Recipe::BLOCKWISE:
      return arch == GpuArch::HOPPER || arch == GpuArch::BLACKWELL;
    case Fp8Recipe::DELAYED:
    case Fp8Recipe::TENSORWISE:
      break;
  }
  return true;
}

double fp8_cast_bytes_per_element(Fp8Recipe recipe, bool tn_only) {
  // Transformer Engine's fused cast (transformer_engine/common/transpose/cast_transpose.cu,
  // common/util/cast_kernels.cuh) reads the 16-bit tensor once (2 B) and writes the FP8 copy
  // (1 B) and, in the same pass, the copy a backward GEMM needs: a per-tensor recipe the
  // transpose only where FP8 GEMMs take just the TN layout (Hopper: the weight-gradient GEMM
  // reads the transposes; Blackwell reads the row-wise copy in any layout); a block recipe
  // always the column-wise copy, whose blocks run the other way.
  const double per_tensor = 2 + 1 + (tn_only ? 1 : 0);
  constexpr double BOTH_WAYS = 2 + 1 + 1;
  switch (recipe) {
    case Fp8Recipe::DELAYED:
      return per_tensor;  // the scale comes from the amax history: no extra pass
    case Fp8Recipe::TENSORWISE:
      return per_tensor + 2;  // the scale needs this tensor's amax first: one more 16-bit read
    case Fp8Recipe::BLOCKWISE:
      // an fp32 scale per 128 elements on each copy (the 1x128 activation density, an upper
      // bound for the 128x128-block weights)
      return BOTH_WAYS + 2 * 4.0 / 128;
    case Fp8Recipe::MXFP8:
      return BOTH_WAYS + 2 * MXFP8_SCALE_BYTES_PER_ELEMENT;  // an E8M0 scale per 32, each copy
  }
  return per_tensor;
}

// NVFP4 (Transformer Engine NVFP4BlockScaling, the recipe of NVIDIA's "Pretraining Large
// Language Models with NVFP4", arXiv:2509.25149): the per-tensor FP32 scale comes from the
// tensor's own amax (one 16-bit read first, as current scaling), then one fused kernel reads
// the 16-bit tensor and writes the row-wise and column-wise E2M1 copies (0.5 B each) with an
// E4M3 scale per 16 elements; the 16x16 random Hadamard transform of the weight-gradient
// operands is applied in that kernel and adds no traffic.
const double NVFP4_CAST_BYTES_PER_ELEMENT = 2 + 2 + 2 * (0.5 + NVFP4_SCALE_BYTES_PER_ELEMENT);

DatasheetKernelModel::DatasheetKernelModel(GpuSpec gpu, GpuEfficiency efficiency)
    : gpu_(std::move(gpu)), efficiency_(efficiency), clock_(sustained_clock_fraction(gpu_)) {
  check_invariant(gpu_.bf16_flops > 0 && gpu_.hbm_bandwidth_Bps > 0,
                  "GPU spec without bf16 peak or HBM bandwidth");
  check_invariant(gpu_.sm_count > 0, "GPU spec without an SM count");
}

double DatasheetKernelModel::gemm_fraction(DType math) const {
  if (efficiency_.matmul_peak_fraction > 0) return efficiency_.matmul_peak_fraction;
  // A GPU without the dtype's tensor cores runs it on bf16 ones (peak_flops), at their rate.
  DType tensor = tensor_core_dtype(math);
  if (tensor == DType::FP4 && gpu_.fp4_flops <= 0) tensor = DType::FP8;
  if (tensor == DType::FP8 && gpu_.fp8_flops <= 0) tensor = DType::BF16;
  double measured = 0;
  switch (tensor) {
    case DType::TF32:
      measured = gpu_.gemm_fraction_tf32;
      break;
    case DType::FP16:
      measured = gpu_.gemm_fraction_fp16;
      break;
    case DType::FP4:  // no per-GPU FP4 measurement: the FP8 one (see above)
    case DType::FP8:
      measured = gpu_.gemm_fraction_fp8;
      break;
    case DType::BF16:
    case DType::FP32:
      measured = gpu_.gemm_fraction_bf16;
      break;
  }
  return measured > 0 ? measured : architecture_gemm_fraction(gpu_.arch, tensor);
}

double DatasheetKernelModel::attention_fraction() const {
  if (efficiency_.attention_fraction > 0) return efficiency_.attention_fraction;
  return gpu_.attention_fraction > 0 ? gpu_.attention_fraction
                                     : architecture_attention_fraction(gpu_.arch);
}

double DatasheetKernelModel::attention_backward_ratio() const {
  // The GPU's own backward figure holds with its own forward one, not with an override of
  // the forward fraction.
  if (efficiency_.attention_fraction <= 0 && gpu_.attention_backward_fraction > 0)
    return gpu_.attention_backward_fraction / attention_fraction();
  return efficiency_.attention_backward_ratio;
}

double DatasheetKernelModel::attention_backward_fraction() const {
  return attention_fraction() * attention_backward_ratio();
}

Fp8Recipe DatasheetKernelModel::fp8_recipe(const KernelOp& op) const {
  return op.fp8_recipe.value_or(default_fp8_recipe());
}

DType KernelTimeModel::peak_dtype(DType math) const {
  return tensor_core_dtype(math);
}

Fp8Recipe KernelTimeModel::default_fp8_recipe() const {
  return Fp8Recipe::DELAYED;
}

Fp8Recipe DatasheetKernelModel::default_fp8_recipe() const {
  return topo::default_fp8_recipe(gpu_.arch);
}

DType DatasheetKernelModel::peak_dtype(DType math) const {
  // A GPU without a dtype's tensor cores runs it on the next wider ones it has.
  switch (tensor_core_dtype(math)) {
    case DType::FP4:
      if (gpu_.fp4_flops > 0) return DType::FP4;
      [[fallthrough]];
    case DType::FP8:
      return gpu_.fp8_flops > 0 ? DType::FP8 : DType::BF16;
    case DType::FP16:
      return gpu_.fp16_flops > 0 ? DType::FP16 : DType::BF16;
    case DType::BF16:
      return DType::BF16;
    case DType::TF32:
      return gpu_.tf32_flops > 0 ? DType::TF32 : DType::FP32;
    case DType::FP32:
      break;  // tensor_core_dtype never returns FP32
  }
  return DType::BF16;
}

double DatasheetKernelModel::peak_flops(DType math) const {
  switch (peak_dtype(math)) {
    case DType::FP4:
      return gpu_.fp4_flops;
    case DType::FP8:
      return gpu_.fp8_flops;
    case DType::FP16:
      return gpu_.fp16_flops;
    case DType::BF16:
      return gpu_.bf16_flops;
    case DType::TF32:
      return gpu_.tf32_flops;
    case DType::FP32:
      return gpu_.fp32_flops;
  }
  return gpu_.bf16_flops;
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

double DatasheetKernelModel::matmul_half_dim(DType math) const {
  if (efficiency_.matmul_half_dim > 0) return efficiency_.matmul_half_dim;
  return architecture_matmul_half_dim(gpu_.arch, peak_dtype(math));
}

double DatasheetKernelModel::matmul_efficiency(std::int64_t m, std::int64_t n, std::int64_t k,
                                               std::int64_t batch, DType math) const {
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0) return 1.0;
  const double h = matmul_half_dim(math);
  auto sat = [h](double x) { return x / (x + h); };
  // Shape: each dimension saturates on its own; the normalisation keeps a large square
  // GEMM (8192) at exactly the large-GEMM fraction.
  const double big = sat(8192.0);
  const double shape = (sat(double(m)) / big) * (sat(double(n)) / big) * (sat(double(k)) / big);
  // Wave quantisation: output tiles are dealt to SMs in waves; a partial last wave idles SMs.
  const double tile = efficiency_.matmul_tile;
  const double tiles =
      std::ceil(double(m) / tile) * std::ceil(double(n) / tile) * static_cast<double>(batch);
  const double sms = gpu_.sm_count;
  // Fewer tiles than SMs: libraries split K across CTAs (split-K / stream-K) to fill the GPU,
  // so only the shape saturation applies.
  const double waves = std::ceil(tiles / sms);
  const double wave = tiles < sms ? 1.0 : tiles / (waves * sms);
  return std::clamp(gemm_fraction(math) * std::min(shape, 1.0) * wave, 1e-3, 1.0);
}

double DatasheetKernelModel::gemm_time_s(double flops, std::int64_t m, std::int64_t n,
                                         std::int64_t k, std::int64_t batch, DType math) const {
  if (flops <= 0) return 0;
  return flops / (peak_flops(math) * matmul_efficiency(m, n, k, batch, math) * clock_) +
         efficiency_.kernel_overhead_s;
}

double DatasheetKernelModel::grouped_launch_extra_s(const KernelOp& op) const {
  // Transformer Engine's GroupedLinear (the MoE experts of Megatron-core) runs its grouped
  // GEMM as one cuBLAS GEMM per expert: te_general_grouped_gemm ("For now, we only have
  // multi-stream cublas backend", transformer_engine/pytorch/csrc/extensions/gemm.cpp) calls
  // nvte_multi_stream_cublas_gemm (common/gemm/cublaslt_gemm.cu), which launches the GEMMs
  // one by one from the host, dealt over num_streams = 4 compute streams (common/include/
  // transformer_engine/gemm.h). The streams overlap the kernels' execution (the tiles of the
  // TE_GROUPED_GEMM_STREAMS groups in flight share the SMs: concurrent_groups), not their
  // launches: every group pays the per-kernel launch cost, batch - 1 more than one batched
  // kernel.
  if (!op.per_group_kernels || op.batch <= 1) return 0;
  return static_cast<double>(op.batch - 1) * efficiency_.kernel_overhead_s;
}

double DatasheetKernelModel::memory_time_s(double bytes) const {
  if (bytes <= 0) return 0;
  return bytes / (gpu_.hbm_bandwidth_Bps * efficiency_.memory_bandwidth_fraction) +
         efficiency_.kernel_overhead_s;
}

double DatasheetKernelModel::attention_time_s(double flops, DType math, double shape,
                                              int kernels) const {
  if (flops <= 0) return 0;
  return flops / (peak_flops(math) * std::min(attention_fraction() * shape, 1.0) * clock_) +
         kernels * efficiency_.kernel_overhead_s;
}

double attention_kernel_factor(AttentionKernel kernel, GpuArch arch) {
  // FlashAttention-2 predates Hopper's asynchronous tensor-core instructions (WGMMA, TMA);
  // FlashAttention-3, which uses them, is "1.5-2.0x faster than FlashAttention-2" in BF16 on
  // H100 (Shah et al. 2024, abstract): FA2 runs at 1 / 1.75 (the range's midpoint) of
  // FlashAttention-3's 579 TFLOP/s at the reference shape (Fig. 5), relative here to the
  // vendor (cuDNN) kernel's 518 of the same figure. Before Hopper FA2 is the reference
  // kernel itself (the Ampere fraction).
  if (kernel == AttentionKernel::FA2 && (arch == GpuArch::HOPPER || arch == GpuArch::BLACKWELL))
    return (579.0 / 1.75) / 518.0;
  return 1.0;
}

double DatasheetKernelModel::fused_attention_s(const KernelOp& op, double flops, DType math) const {
  const AttentionShapeModel m =
      efficiency_.attention_shape.value_or(architecture_attention_shape(gpu_.arch));
  const double k = attention_kernel_factor(op.kernel, gpu_.arch);
  if (op.cp_ring <= 1 || op.seq_q <= 0)
    return attention_time_s(
        flops, math, k * attention_shape_factor(op.seq_q, op.seq_kv, op.head_dim, op.causal, m));
  // Ring attention (Megatron-core / Transformer Engine attention with CP, load-balanced
  // chunking: each rank holds two s / (2 cp) chunks, c = s / cp queries in all) runs one
  // kernel per ring step. Unmasked: cp steps of c x c. Causal: step 0 is the causal c x c
  // diagonal (1 / cp of the work); each other step is unmasked c x c/2 work, for half of
  // the steps all c queries over the first half of the remote keys, for the other half the
  // second half of the queries over all c remote keys (TE attn_forward_func_with_cp).
  const std::int64_t c = op.seq_q, d = op.head_dim;
  const int cp = op.cp_ring;
  if (!op.causal)
    return attention_time_s(flops, math, k * attention_shape_factor(c, c, d, false, m), cp);
  const double diagonal = flops / cp, half_rest = (flops - diagonal) / 2;
  return attention_time_s(diagonal, math, k * attention_shape_factor(c, c, d, true, m)) +
         attention_time_s(half_rest, math, k * attention_shape_factor(c, c / 2, d, false, m),
                          cp - 1) +
         attention_time_s(half_rest, math, k * attention_shape_factor(c / 2, c, d, false, m), 0);
}

double DatasheetKernelModel::attention_seconds(const KernelOp& op, KernelPass pass,
                                               DType math) const {
  // Attention has no weights: its backward (dQ, dK, dV) is one kernel, timed as the input
  // gradient with the FLOPs of both backward halves.
  if (pass == KernelPass::BACKWARD_WEIGHT) return 0;
  const double backward_flops = op.backward_input_flops + op.backward_weight_flops;
  if (!op.fused) {
    // Unfused: scores and context are batched GEMMs; the backward runs at the transposed
    // (dA) shape, as one GEMM of the whole backward's FLOPs.
    if (pass == KernelPass::FORWARD)
      return gemm_time_s(op.forward_flops, op.m, op.n, op.k, op.batch, math);
    return gemm_time_s(backward_flops, op.m, op.k, op.n, op.batch, math);
  }
  // Fused attention skips the masked part of a causal square.
  const double scale = op.causal ? efficiency_.attention_causal_fraction : 1.0;
  if (pass == KernelPass::FORWARD) return fused_attention_s(op, op.forward_flops * scale, math);
  // The overhead is divided too: the backward is one slower kernel (kept for bit-identical
  // step times with the model this replaced).
  return fused_attention_s(op, backward_flops * scale, math) / attention_backward_ratio();
}

double DatasheetKernelModel::fp8_cast_seconds(const KernelOp& op, KernelPass pass,
                                              DType math) const {
  // One cast kernel per operand: forward the input [m x k] and the weight [k x n], the latter
  // on op.cached_operand_share of the passes (a cache over a step's micro-batches);
  // backward the output gradient [m x n]. Delayed scaling's amax-history update is one small
  // kernel per step and is not counted.
  const bool fp4 = math == DType::FP4 && gpu_.fp4_flops > 0;
  const Fp8Recipe recipe = fp8_recipe(op);
  const double per_element = fp4 ? NVFP4_CAST_BYTES_PER_ELEMENT
                                 : fp8_cast_bytes_per_element(recipe, fp8_gemm_tn_only(gpu_.arch));
  const double b = static_cast<double>(op.batch);
  const double m = static_cast<double>(op.m), n = static_cast<double>(op.n),
               k = static_cast<double>(op.k);
  // Block-scaled GEMMs first swizzle their operands' scales (block_scale_swizzles): one
  // kernel per operand and group, reading and writing its scales (E8M0 per 32 elements for
  // MXFP8, E4M3 per 16 for NVFP4).
  const bool swizzled = block_scale_swizzles(op, pass, math, default_fp8_recipe()) > 0;
  const double scale = fp4 ? NVFP4_SCALE_BYTES_PER_ELEMENT : MXFP8_SCALE_BYTES_PER_ELEMENT;
  const auto swizzle_s = [&](double elements) {
    return swizzled ? b * memory_time_s(2 * scale * elements) : 0.0;
  };
  if (pass == KernelPass::FORWARD)
    return memory_time_s(per_element * b * m * k) +
           op.cached_operand_share * memory_time_s(per_element * b * k * n) + swizzle_s(m * k) +
           swizzle_s(k * n);
  if (pass == KernelPass::BACKWARD_INPUT)
    return memory_time_s(per_element * b * m * n) + 2 * swizzle_s(m * n) + swizzle_s(k * n) +
           swizzle_s(m * k);
  return 0;
}

double DatasheetKernelModel::memory_bound_seconds(const KernelOp& op, KernelPass pass) const {
  // The backward (input and weight gradients of a norm or elementwise op) moves about twice
  // the forward bytes unless the op says what it moves; an unfused chain pays each of its
  // kernels' overhead.
  const double extra = (op.kernels - 1) * efficiency_.kernel_overhead_s;
  if (pass == KernelPass::FORWARD) return op.bytes > 0 ? memory_time_s(op.bytes) + extra : 0;
  if (pass != KernelPass::BACKWARD_INPUT) return 0;
  const double bytes =
      op.backward_bytes >= 0 ? op.backward_bytes : efficiency_.memory_backward_factor * op.bytes;
  return bytes > 0 ? memory_time_s(bytes) + extra : 0;
}

bool block_scaled_gemm(DType math, Fp8Recipe recipe) {
  return math == DType::FP4 || (math == DType::FP8 && recipe == Fp8Recipe::MXFP8);
}

double block_scale_swizzles(const KernelOp& op, KernelPass pass, DType math,
                            Fp8Recipe unset_recipe) {
  if (op.kind != KernelKind::FP8_CAST || !op.swizzle_scales ||
      !block_scaled_gemm(math, op.fp8_recipe.value_or(unset_recipe)))
    return 0;
  const double groups = static_cast<double>(std::max<std::int64_t>(op.batch, 1));
  if (pass == KernelPass::FORWARD) return 2 * groups;
  return pass == KernelPass::BACKWARD_INPUT ? 4 * groups : 0;
}

std::int64_t concurrent_groups(const KernelOp& op) {
  const std::int64_t batch = std::max<std::int64_t>(op.batch, 1);
  return op.per_group_kernels ? std::min(batch, TE_GROUPED_GEMM_STREAMS) : batch;
}

double kernel_launches(const KernelOp& op, KernelPass pass, DType math, Fp8Recipe unset_recipe) {
  const bool forward = pass == KernelPass::FORWARD;
  const double groups =
      op.per_group_kernels ? static_cast<double>(std::max<std::int64_t>(op.batch, 1)) : 1.0;
  switch (op.kind) {
    case KernelKind::GEMM: {
      const double flops = forward                              ? op.forward_flops
                           : pass == KernelPass::BACKWARD_INPUT ? op.backward_input_flops
                                                                : op.backward_weight_flops;
      return flops > 0 ? groups : 0;
    }
    case KernelKind::ATTENTION:
      if (pass == KernelPass::BACKWARD_WEIGHT) return 0;
      if (forward ? op.forward_flops <= 0 : op.backward_input_flops + op.backward_weight_flops <= 0)
        return 0;
      return op.fused ? std::max(op.cp_ring, 1) : 1;
    case KernelKind::MEMORY_BOUND: {
      if (pass == KernelPass::BACKWARD_WEIGHT) return 0;
      const double bytes = forward || op.backward_bytes < 0 ? op.bytes : op.backward_bytes;
      return bytes > 0 ? std::max(op.kernels, 1) : 0;
    }
    case KernelKind::OPTIMIZER:
      return forward && op.bytes > 0 ? 1 : 0;
    case KernelKind::FP8_CAST: {
      const double swizzles = block_scale_swizzles(op, pass, math, unset_recipe);
      if (forward) return 1 + op.cached_operand_share + swizzles;
      return pass == KernelPass::BACKWARD_INPUT ? 1 + swizzles : 0;
    }
  }
  return 0;
}

double DatasheetKernelModel::seconds(const KernelOp& op, KernelPass pass, DType math) const {
  const double t = raw_seconds(op, pass, math);
  if (!op.graphed || t <= 0) return t;
  const double launches = kernel_launches(op, pass, math, default_fp8_recipe());
  return std::max(t - launches * efficiency_.graph_launch_saving_s, 0.0);
}

double DatasheetKernelModel::raw_seconds(const KernelOp& op, KernelPass pass, DType math) const {
  switch (op.kind) {
    case KernelKind::GEMM: {
      // Forward C = A·B ([m x k]·[k x n]); dA = dC·Bᵀ is [m x n]·[n x k]; dB = Aᵀ·dC is
      // [k x m]·[m x n]: each timed at the efficiency of its own shape. A grouped GEMM
      // launched per group shares the SMs only among the groups its streams run at once
      // (concurrent_groups).
      const std::int64_t b = concurrent_groups(op);
      double t = 0;
      switch (pass) {
        case KernelPass::FORWARD:
          t = gemm_time_s(op.forward_flops, op.m, op.n, op.k, b, math);
          break;
        case KernelPass::BACKWARD_INPUT:
          t = gemm_time_s(op.backward_input_flops, op.m, op.k, op.n, b, math);
          break;
        case KernelPass::BACKWARD_WEIGHT:
          t = gemm_time_s(op.backward_weight_flops, op.k, op.n, op.m, b, math);
          break;
      }
      return t > 0 ? t + grouped_launch_extra_s(op) : t;
    }
    case KernelKind::ATTENTION:
      return attention_seconds(op, pass, math);
    case KernelKind::MEMORY_BOUND:
      return memory_bound_seconds(op, pass);
    case KernelKind::OPTIMIZER:
      return pass == KernelPass::FORWARD ? memory_time_s(op.bytes) : 0.0;
    case KernelKind::FP8_CAST:
      return fp8_cast_seconds(op, pass, math);
  }
  return 0;
}

}  // namespace loom::topo
