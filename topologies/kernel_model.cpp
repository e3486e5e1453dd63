#include "topologies/kernel_model.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "common/error.hpp"
#include "common/sliding_window.hpp"

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
  return at_tdp * std::min(1.0, dvfs_clock_ratio(gpu.power_limit_watts, gpu.tdp_watts));
}

double dvfs_clock_ratio(double watts, double reference_watts) {
  return std::cbrt(watts / reference_watts);
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
        flops, math,
        k * attention_shape_factor(op.seq_q, op.seq_kv, op.head_dim, op.causal, m, op.window));
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
    // Unfused: scores and context are batched GEMMs over the whole square, masked afterwards,
    // so a sliding window saves nothing: the GEMMs' own shape gives the FLOPs they run, not
    // the window's counted ones (the model's). The backward (twice the forward) runs at the
    // transposed (dA) shape, as one GEMM of the whole backward's FLOPs.
    const bool square = windowed(static_cast<double>(op.seq_kv), static_cast<double>(op.window));
    const double full = 2.0 * op.m * op.n * op.k * op.batch;
    if (pass == KernelPass::FORWARD)
      return gemm_time_s(square ? full : op.forward_flops, op.m, op.n, op.k, op.batch, math);
    return gemm_time_s(square ? 2 * full : backward_flops, op.m, op.k, op.n, op.batch, math);
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
