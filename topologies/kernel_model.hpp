#pragma once
// The GPU kernel-time model: how long one op of a model's op list takes on one GPU, for one
// pass (forward, input gradient, weight gradient) and one math dtype. KernelTimeModel is the
// interface the step planner asks; DatasheetKernelModel times from the GPU's datasheet
// (topologies/gpu_catalog.hpp) and named efficiency coefficients (GpuEfficiency); a calibrated
// profile is a second (MeasuredKernelModel). The model owns every derivation a planner would
// otherwise repeat: the transposed shapes of backward GEMMs, the causal skip and backward rate
// of fused attention, non-fused attention as GEMMs, the memory-bound backward factor, the
// per-kernel overhead and the tensor-core dtype of fp32 math (TF32). It knows nothing of
// models/: an op is described by its kind, forward GEMM shape, FLOPs per pass and bytes.
#include <cstdint>
#include <optional>

#include "common/dtype.hpp"
#include "topologies/gpu_catalog.hpp"

namespace loom::topo {

/// Element types a kernel computes in: the one dtype enum (common/dtype.hpp).
using DType = loom::DType;

/// The fused-attention implementation: the vendor's (cuDNN through Transformer Engine, at the
/// architecture's fraction) or FlashAttention-2 (PyTorch SDPA's flash backend).
enum class AttentionKernel { VENDOR, FA2 };

/// Throughput of `kernel` relative to the architecture's fused-attention fraction: 1, except
/// FlashAttention-2 on Hopper and Blackwell, 1 / 1.75 (FlashAttention-3 paper, abstract).
double attention_kernel_factor(AttentionKernel kernel, GpuArch arch);

/// What kind of kernel an op runs.
enum class KernelKind {
  GEMM,          ///< a (batched) matrix multiply
  ATTENTION,     ///< the attention core: fused (flash) kernel, or its GEMMs when not fused
  MEMORY_BOUND,  ///< elementwise / normalisation / softmax: time = bytes moved / bandwidth
  OPTIMIZER,     ///< the optimizer step: memory-bound over the bytes it moves
  /// The FP8 quantisation of one FP8 GEMM's operands (m, n, k, batch of that GEMM): forward
  /// casts the input [m x k] and the weight [k x n], backward the output gradient [m x n];
  /// memory-bound, bytes per element by the GPU's FP8 recipe (fp8_cast_bytes_per_element),
  /// or NVFP4's when timed in FP4 on a GPU with FP4 tensor cores.
  FP8_CAST,
};

/// FP8 scaling recipes (common/dtype.hpp).
using Fp8Recipe = loom::Fp8Recipe;

/// Which pass of an op is timed.
enum class KernelPass {
  FORWARD,          ///< the forward pass (OPTIMIZER: the step itself)
  BACKWARD_INPUT,   ///< input (activation) gradient; for ops without weights, the whole backward
  BACKWARD_WEIGHT,  ///< weight gradient (GEMM only; other kinds fold it into BACKWARD_INPUT)
};

/// One op of a model's op list as the kernel model sees it. Fields a kind does not use are
/// ignored.
struct KernelOp {
  KernelKind kind = KernelKind::GEMM;
  /// Forward GEMM C[m x n] = A[m x k]·B[k x n] (GEMM and non-fused ATTENTION), in elements.
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t batch = 1;  ///< independent GEMMs of that shape (e.g. heads)
  /// GEMM: the `batch` GEMMs are a grouped GEMM launched as one kernel per group (MoE
  /// experts under Transformer Engine's GroupedLinear), each paying the per-kernel overhead;
  /// false: one batched kernel.
  bool per_group_kernels = false;
  double forward_flops = 0;          ///< FLOPs of the forward pass
  double backward_input_flops = 0;   ///< FLOPs of the input gradient (dA; attention dQ)
  double backward_weight_flops = 0;  ///< FLOPs of the weight gradient (dB; attention dK, dV)
  /// MEMORY_BOUND: bytes the forward moves (reads + writes); OPTIMIZER: bytes the step moves.
  double bytes = 0;
  bool causal = false;  ///< ATTENTION: causal mask (a fused kernel skips the masked half)
  /// ATTENTION (fused): query tokens of one sequence on this GPU; 0: unknown, the kernel
  /// runs at the architecture's reference fraction (attention_shape_factor 1).
  std::int64_t seq_q = 0;
  std::int64_t seq_kv = 0;    ///< ATTENTION (fused): key/value tokens each query sees
  std::int64_t head_dim = 0;  ///< ATTENTION (fused): head dimension of this matmul
  /// ATTENTION (fused): context-parallel ring size; > 1 runs the op as `cp_ring` chunk
  /// kernels of ring attention (Megatron / Transformer Engine load-balanced chunking).
  int cp_ring = 1;
  /// ATTENTION (fused, causal): sliding window in keys, 0 for full attention; a windowed
  /// query tile visits about `window` keys, and two half-masked tiles (diagonal, window edge).
  std::int64_t window = 0;
  bool fused = false;  ///< ATTENTION: one fused (flash) kernel rather than GEMMs
  /// ATTENTION (fused): which implementation runs it (AttentionKernel).
  AttentionKernel kernel = AttentionKernel::VENDOR;
  /// MEMORY_BOUND: kernels each pass launches (an unfused elementwise chain), each paying
  /// the per-kernel overhead.
  int kernels = 1;
  /// MEMORY_BOUND: bytes the backward moves; negative: memory_backward_factor x `bytes`.
  double backward_bytes = -1;
  /// Launched from a CUDA graph: each kernel saves GpuEfficiency::graph_launch_saving_s.
  bool graphed = false;
  /// FP8_CAST: share of the forward passes that cast the [k x n] operand; a framework that
  /// caches the cast across the m passes of a step (the operand is unchanged between them)
  /// pays 1 / m per pass.
  double cached_operand_share = 1.0;
  /// GEMM timed in FP8, FP8_CAST: the scaling recipe; unset: the GPU's default
  /// (default_fp8_recipe).
  std::optional<Fp8Recipe> fp8_recipe;
  /// FP8_CAST of a block-scaled GEMM (MXFP8, NVFP4): a separate kernel swizzles each operand's
  /// scales into the GEMM's layout before every GEMM (block_scale_swizzles); false: the
  /// quantisation wrote them GEMM-ready.
  bool swizzle_scales = false;
};

/// Compute streams Transformer Engine deals a grouped GEMM's per-group cuBLAS GEMMs over
/// (`num_streams = 4`, transformer_engine/common/include/transformer_engine/gemm.h; used by
/// nvte_multi_stream_cublas_gemm, common/gemm/cublaslt_gemm.cu).
inline constexpr std::int64_t TE_GROUPED_GEMM_STREAMS = 4;
/// The groups of `op` whose tiles share the SMs at once: a grouped GEMM launched per group
/// (per_group_kernels) runs at most TE_GROUPED_GEMM_STREAMS of them concurrently, so its wave
/// quantisation pools that many; a batched GEMM (one kernel) pools its whole batch.
std::int64_t concurrent_groups(const KernelOp& op);

/// Kernels the host launches for `pass` of `op` (0 when the pass does no work): a GEMM
/// pass one (a grouped GEMM launched per group: `batch`); fused attention one per ring step
/// (`cp_ring`), none for BACKWARD_WEIGHT (its backward is one kernel); a memory-bound op its
/// chain of `kernels`; the optimizer one; an FP8 cast forward the input cast plus the weight
/// cast on `cached_operand_share` of the passes, backward the output-gradient cast. A grouped
/// op's casts are one multi-tensor kernel (Transformer Engine GroupedLinear quantises every
/// group's input in one fused_multi_quantize / split_quantize call). Block-scaled GEMMs
/// (`math` FP4, or FP8 with the op's fp8_recipe MXFP8) add their scale swizzles to the cast:
/// block_scale_swizzles per pass. `unset_recipe` stands for an op without an fp8_recipe (the
/// GPU's default, which the model knows and this function does not).
double kernel_launches(const KernelOp& op, KernelPass pass, DType math,
                       Fp8Recipe unset_recipe = Fp8Recipe::DELAYED);
/// Scale-swizzle kernels an FP8_CAST op's GEMMs launch in `pass` when their operands are
/// block-scaled (MXFP8, NVFP4) and op.swizzle_scales: Transformer Engine before GEMM-ready
/// quantisation (PR #2486, merged December 2025, and the fused quantise-and-swizzle kernels
/// that followed) reorders each operand's scales into the layout cuBLAS's block-scaled GEMM
/// reads before every GEMM (te_general_gemm: swizzle_scaling_factors(A),
/// swizzle_scaling_factors(B); per group of a grouped GEMM, common/gemm/cublaslt_gemm.cu):
/// forward 2 per group (input, weight), backward 4 (the input-gradient GEMM's output
/// gradient and weight, the weight-gradient GEMM's input and output gradient); 0 otherwise.
/// An op without an fp8_recipe runs `unset_recipe` (as in kernel_launches).
double block_scale_swizzles(const KernelOp& op, KernelPass pass, DType math,
                            Fp8Recipe unset_recipe = Fp8Recipe::DELAYED);
/// Whether a GEMM on data in `math` under `recipe` reads block-scaled operands: FP4 (NVFP4's
/// scale per 16 elements) or FP8 under MXFP8 (E8M0 per 32). The one answer the kernel model
/// (swizzles) and the plan rules (--scale-swizzle) share.
bool block_scaled_gemm(DType math, Fp8Recipe recipe);

/// Seconds of each pass of one op.
struct PassSeconds {
  double forward = 0;          ///< in seconds
  double backward_input = 0;   ///< in seconds
  double backward_weight = 0;  ///< in seconds
};

/// Times kernels on one GPU model. Implementations are immutable after construction.
class KernelTimeModel {
 public:
  virtual ~KernelTimeModel() = default;
  /// Seconds one GPU spends on `pass` of `op` with data in `math` (0 when the pass does no
  /// work, e.g. BACKWARD_WEIGHT of an op without weights).
  virtual double seconds(const KernelOp& op, KernelPass pass, DType math) const = 0;
  /// Dense peak in FLOP/s at which matmuls on data in `math` run (the MFU denominator).
  virtual double peak_flops(DType math) const = 0;
  /// The tensor-core format whose dense peak peak_flops(math) is ("of the BF16 dense peak");
  /// by default tensor_core_dtype(math).
  virtual DType peak_dtype(DType math) const;
  /// The FP8 recipe of an FP8 GEMM whose KernelOp leaves fp8_recipe unset (the GPU's:
  /// default_fp8_recipe of its architecture); by default delayed.
  virtual Fp8Recipe default_fp8_recipe() const;
  /// Seconds of the forward, input-gradient and weight-gradient passes of `op`.
  PassSeconds pass_seconds(const KernelOp& op, DType math) const;
};

/// The dtype tensor cores compute matmuls on data in `math` in: fp32 runs as TF32 (Megatron
/// and PyTorch fp32 training use TF32 tensor cores on A100 and later); others unchanged.
DType tensor_core_dtype(DType math);

/// Fraction of the dense datasheet peak a large GEMM reaches on `arch` in tensor-core dtype
/// `tensor` (cuBLAS maximum achievable matmul FLOPS at the GPU's TDP; sources in
/// kernel_coefficients.cpp and docs/defaults.md), in (0, 1].
double architecture_gemm_fraction(GpuArch arch, DType tensor);
/// Dimension at which one GEMM dimension alone halves throughput on `arch` in tensor-core
/// dtype `tensor` (fitted to a measured GEMM sweep; sources in kernel_coefficients.cpp).
double architecture_matmul_half_dim(GpuArch arch, DType tensor);
/// Fraction of the dense peak a fused attention forward reaches on `arch` at the reference
/// shape (causal, head dim 128, 4096 tokens), in (0, 1].
double architecture_attention_fraction(GpuArch arch);

/// Sequence-shape constants of fused attention (defaults: FlashAttention-3 on H100, Shah et
/// al. 2024, Fig. 5; derivation and the per-architecture figures in kernel_coefficients.cpp).
struct AttentionShapeModel {
  /// Key/value tokens per query tile at which the per-tile fixed work (loading Q, the
  /// final rescale, writing O and the log-sum-exp) halves throughput.
  double half_kv_tokens = 200;
  /// Head dimension at which the per-score softmax work (exp, max, rescale on the
  /// non-tensor-core units) halves throughput: matmul work per score grows with d.
  double half_head_dim = 48;
  /// Key/value tile of the kernel: a causal diagonal tile is computed whole, half masked.
  double kv_tile = 128;
};
/// Throughput of a fused attention kernel of `seq_q` queries over `seq_kv` keys (causal:
/// the bottom-right aligned mask) and head dimension `head_dim`, relative to the reference
/// shape of architecture_attention_fraction (causal, 128, 4096 square): per query tile the
/// kernel streams its key/value tiles, so fixed per-tile work is amortised over the mean
/// keys visited, L / (L + half_kv_tokens); softmax work per score is amortised over the head
/// dimension, d / (d + half_head_dim); causal diagonal tiles are computed whole. 1 when
/// any length is unknown (0).
double attention_shape_factor(std::int64_t seq_q, std::int64_t seq_kv, std::int64_t head_dim,
                              bool causal, const AttentionShapeModel& shape = {},
                              std::int64_t window = 0);
/// The attention shape constants of `arch`'s vendor kernel: Blackwell's cuDNN kernels lose
/// more to short sequences than Hopper's (half_kv_tokens 730, not 200); others the defaults.
AttentionShapeModel architecture_attention_shape(GpuArch arch);
/// Sustained SM clock under load relative to the boost clock the datasheet peak assumes, in
/// (0, 1]: the GPU's load_clock_fraction (default DEFAULT_LOAD_CLOCK_FRACTION) times
/// (power_limit / TDP)^(1/3) below the TDP (1 at or above it, or when either is unknown).
double sustained_clock_fraction(const GpuSpec& gpu);
/// The sustained clock at `watts` relative to the clock at `reference_watts` under the
/// cube-root DVFS law sustained_clock_fraction applies (dynamic power ∝ f·V², V ∝ f).
double dvfs_clock_ratio(double watts, double reference_watts);
/// The FP8 recipe frameworks run by default on `arch`: MXFP8 on Blackwell, delayed
/// per-tensor scaling elsewhere.
Fp8Recipe default_fp8_recipe(GpuArch arch);
/// Whether `arch`'s FP8 GEMMs take only the TN layout (Ada, Hopper), so a per-tensor FP8
/// operand needs a transposed copy for the backward GEMMs. Blackwell's take every layout
/// (Transformer Engine `is_non_tn_fp8_gemm_supported`: compute capability 10.x and 11.x).
bool fp8_gemm_tn_only(GpuArch arch);
/// Whether `arch` applies `recipe`'s scales in its tensor cores: MXFP8 needs Blackwell's
/// block-scaled MMA; the per-tensor and 128-element block recipes run wherever FP8 does.
bool fp8_recipe_supported(Fp8Recipe recipe, GpuArch arch);
/// Bytes HBM moves per element of one FP8 GEMM operand to quantise it under `recipe` (the
/// read of the 16-bit tensor, the FP8 copy and, where a backward GEMM needs it, its
/// transposed (`tn_only`) or column-wise copy, scales).
double fp8_cast_bytes_per_element(Fp8Recipe recipe, bool tn_only);

/// Named efficiency coefficients of the datasheet model. Defaults are physical and documented
/// in docs/simulate.md; they are not fitted to any particular run.
struct GpuEfficiency {
  /// Fraction of the dense datasheet peak a large, square, tile-aligned GEMM reaches; 0 (the
  /// default): the GPU's per-dtype figure (GpuSpec::gemm_fraction_*, else
  /// architecture_gemm_fraction).
  double matmul_peak_fraction = 0;
  /// Dimension (elements) at which a GEMM dimension alone halves throughput: per-dimension
  /// efficiency is x / (x + matmul_half_dim). Models under-filled tiles and short K loops.
  /// 0 (the default): the architecture's measured figure (architecture_matmul_half_dim).
  double matmul_half_dim = 0;
  /// Output tile edge (elements) used for wave quantisation (128 x 128 CTA tiles) over the
  /// GPU's SMs (GpuSpec::sm_count).
  int matmul_tile = 128;
  /// Fraction of datasheet HBM bandwidth a streaming elementwise kernel reaches.
  double memory_bandwidth_fraction = 0.80;
  /// Bytes a memory-bound op's backward moves per byte its forward moves (reads the saved
  /// inputs and the output gradient, writes the input gradient: about twice).
  double memory_backward_factor = 2.0;
  /// Fraction of dense peak a fused (flash) attention kernel reaches, forward; 0 (the
  /// default): GpuSpec::attention_fraction, else architecture_attention_fraction.
  double attention_fraction = 0;
  /// Fraction of a causal attention square a fused kernel computes (it skips masked tiles).
  double attention_causal_fraction = 0.5;
  /// How a fused attention kernel's throughput depends on sequence length and head dim;
  /// nullopt (the default): the GPU architecture's (architecture_attention_shape).
  std::optional<AttentionShapeModel> attention_shape;
  /// Backward fused attention throughput relative to forward (FlashAttention-2 backward
  /// runs its 2x FLOPs at about 0.8 of the forward rate, Dao 2023, Fig. 5-6; cuDNN on GB200
  /// 0.82-0.85, kernel_coefficients.cpp), where the GPU has no backward figure of its own
  /// (GpuSpec::attention_backward_fraction) and attention_fraction is not overridden here.
  double attention_backward_ratio = 0.8;
  /// Fixed per-kernel launch and tail cost, in seconds.
  double kernel_overhead_s = 4e-6;
  /// Part of kernel_overhead_s a CUDA-graph launch removes (the stream launch gap between
  /// back-to-back kernels), in seconds: 3.8 us per kernel in a stream vs 3.4 us in a graph
  /// for a 2.9 us kernel (A. Gray, "Getting Started with CUDA Graphs", NVIDIA Technical
  /// Blog, 2019).
  double graph_launch_saving_s = 0.4e-6;
};

/// Kernel times from a GPU's datasheet: GEMMs at the dense peak of their tensor-core dtype
/// times the measured large-GEMM fraction of that dtype on the GPU's architecture, a shape
/// and wave-quantisation efficiency and the sustained clock under its power limit; fused
/// attention at the architecture's attention fraction and clock; memory-bound ops, FP8 casts
/// and the optimizer at a fraction of HBM bandwidth (HBM is clocked apart from the SMs, so a
/// power cap leaves it); plus a fixed overhead per kernel.
class DatasheetKernelModel final : public KernelTimeModel {
 public:
  /// Uses `gpu`'s datasheet (peaks, HBM bandwidth, sm_count) and `efficiency`; throws
  /// InternalError when the spec has no bf16 peak, HBM bandwidth or SM count.
  explicit DatasheetKernelModel(GpuSpec gpu, GpuEfficiency efficiency = {});

  double seconds(const KernelOp& op, KernelPass pass, DType math) const override;
  double peak_flops(DType math) const override;
  /// tensor_core_dtype(math), or the format the GPU runs it on when it lacks that peak (fp8
  /// without FP8 tensor cores and fp16 without an fp16 figure: bf16; tf32 without one: fp32).
  DType peak_dtype(DType math) const override;

  /// Fraction of peak a [m x k]·[k x n] GEMM (repeated `batch` times) on data in `math`
  /// reaches at the TDP clock, in (0, 1].
  double matmul_efficiency(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch = 1,
                           DType math = DType::BF16) const;
  /// Fraction of the dense peak a large GEMM on data in `math` reaches at the TDP clock.
  double gemm_fraction(DType math) const;
  /// The half-throughput dimension of GEMMs on data in `math` (matmul_efficiency's law).
  double matmul_half_dim(DType math) const;
  /// Fraction of the dense peak a fused attention forward reaches at the TDP clock.
  double attention_fraction() const;
  /// Fraction of the dense peak a fused attention backward reaches at the TDP clock (the
  /// GPU's own figure, else attention_fraction() x attention_backward_ratio).
  double attention_backward_fraction() const;
  /// Sustained clock relative to the TDP clock (sustained_clock_fraction of the GPU).
  double clock_fraction() const { return clock_; }
  Fp8Recipe default_fp8_recipe() const override;
  /// The FP8 recipe `op` runs under: its own, else the GPU's default.
  Fp8Recipe fp8_recipe(const KernelOp& op) const;
  /// Seconds for a memory-bound kernel moving `bytes` to and from HBM (0 for no bytes).
  double memory_time_s(double bytes) const;

  /// The GPU's datasheet.
  const GpuSpec& gpu() const { return gpu_; }
  /// The coefficients in use.
  const GpuEfficiency& efficiency() const { return efficiency_; }

 private:
  // Launch cost of a grouped GEMM's extra kernels (one per group), in seconds; 0 otherwise.
  double grouped_launch_extra_s(const KernelOp& op) const;
  // Seconds of `flops` run as `batch` GEMMs of [m x k]·[k x n] in `math`.
  double gemm_time_s(double flops, std::int64_t m, std::int64_t n, std::int64_t k,
                     std::int64_t batch, DType math) const;
  double attention_seconds(const KernelOp& op, KernelPass pass, DType math) const;
  // Seconds for `kernels` fused attention kernels performing `flops` in `math` at the
  // forward rate times `shape` (attention_shape_factor).
  double attention_time_s(double flops, DType math, double shape = 1, int kernels = 1) const;
  // Backward fused attention throughput relative to the forward's.
  double attention_backward_ratio() const;
  // Seconds of the fused forward of `op` performing `flops` (the causal skip applied):
  // one kernel at its shape, or cp_ring ring-attention chunk kernels.
  double fused_attention_s(const KernelOp& op, double flops, DType math) const;

  double fp8_cast_seconds(const KernelOp& op, KernelPass pass, DType math) const;
  // Seconds of `pass` of a MEMORY_BOUND op (its kernels and bytes).
  double memory_bound_seconds(const KernelOp& op, KernelPass pass) const;
  // Seconds of `pass` of `op` before the CUDA-graph launch saving.
  double raw_seconds(const KernelOp& op, KernelPass pass, DType math) const;

  GpuSpec gpu_;
  GpuEfficiency efficiency_;
  double clock_ = 1;  // sustained_clock_fraction(gpu_)
};

}  // namespace loom::topo
