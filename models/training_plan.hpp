#pragma once
// The training plan as data: parallel degrees, batch arithmetic, precision, optimizer,
// ZeRO stage, recompute and schedule. It says nothing about hardware; the memory model
// (models/) reads it and the planner (strategies/) lowers it. Its fields, defaults,
// parsing, serialisation and validation rules live in strategies/plan/.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/dtype.hpp"

namespace loom::models {

enum class Precision { FP32, BF16, FP16, FP8, NVFP4 };
enum class Optimizer { ADAM, SGD, SGD_MOMENTUM };
enum class Recompute { NONE, SELECTIVE, FULL };
enum class Schedule { NAIVE, GPIPE, ONE_F_ONE_B, INTERLEAVED, ZERO_BUBBLE };
enum class GradDtype { FP32, BF16 };
/// What `--recompute selective` recomputes: Megatron's attention core, or torchtitan's
/// op-level policy (keeps every other matmul output and the attention output).
enum class SelectiveRecompute { ATTENTION, OP };
/// Megatron-LM's --recompute-method under full recompute: UNIFORM checkpoints the input of
/// every group of recompute_num_layers layers and re-runs every layer; BLOCK re-runs only the
/// first recompute_num_layers layers of each model chunk (megatron/core/transformer/
/// transformer_block.py, _checkpointed_forward).
enum class RecomputeMethod { UNIFORM, BLOCK };
/// The modules Megatron's selective recompute can re-run (`--recompute-modules`,
/// megatron/core/transformer/transformer_config.py `recompute_modules`): the attention core,
/// MLA's up-projections (and RoPE), a dense layer's MLP, the routed experts' activation, a
/// whole MoE block, the two pre-norms.
enum class RecomputeModule { CORE_ATTN, MLA_UP_PROJ, MLP, MOE_ACT, MOE, LAYERNORM };
/// A set of RecomputeModule values as bits (1 << module).
using RecomputeModules = std::uint32_t;
/// The bit of `m` in a RecomputeModules set.
constexpr RecomputeModules module_bit(RecomputeModule m) {
  return RecomputeModules{1} << static_cast<unsigned>(m);
}
/// The parts of a transformer layer Megatron's partial CUDA graphs can capture
/// (`--cuda-graph-scope`, megatron/core/transformer/enums.py CudaGraphScope): the attention
/// block (input norm, attention, its residual add), a dense layer's MLP block, an MoE layer's
/// router (its pre-norm, the router and the shared experts) and the all-to-all dispatcher's
/// preprocessing; FULL captures the whole layer (`--cuda-graph-impl local`). A dropless MoE
/// layer's dispatch, routed experts and combine have dynamic shapes and stay eager.
enum class GraphModule { FULL, ATTN, MLP, MOE_ROUTER, MOE_PREPROCESS, MAMBA };
/// A set of GraphModule values as bits (1 << module).
using GraphModules = std::uint32_t;
/// The bit of `m` in a GraphModules set.
constexpr GraphModules graph_bit(GraphModule m) {
  return GraphModules{1} << static_cast<unsigned>(m);
}
/// How the loss runs: Megatron's fused cross-entropy (--cross-entropy-loss-fusion), torch's
/// F.cross_entropy on an fp32 upcast of the logits (torchtitan), or Megatron's default
/// vocab-parallel cross-entropy (in-place fp32 torch ops, the flag off).
enum class CrossEntropy { FUSED, EAGER, UNFUSED };
/// Which memory-bound ops of a layer run as fused kernels: NONE (PyTorch eager, one kernel
/// per ATen op), MEGATRON (Transformer Engine / Megatron fused kernels: bias-SwiGLU/GeLU,
/// RoPE, scale-mask-softmax, bias-dropout-add, wgrad accumulation into main_grad),
/// COMPILE (torch.compile: each elementwise chain one kernel; norms one kernel).
enum class Fusion { NONE, MEGATRON, COMPILE };

/// The fused-attention kernel a framework calls: VENDOR = cuDNN fused attention through
/// Transformer Engine (Megatron, NeMo); FA2 = FlashAttention-2 (PyTorch SDPA's flash backend,
/// torchtitan), which does not use Hopper's asynchronous tensor-core instructions.
enum class AttentionKernel { VENDOR, FA2 };
/// How routed tokens reach their experts' GPUs (Megatron --moe-token-dispatcher-type):
/// ALLTOALL, NCCL all-to-all of every routed copy; FLEX, DeepEP / HybridEP, one copy per
/// destination GPU inside a node and one per destination node across nodes.
enum class MoeDispatcher { ALLTOALL, FLEX };
/// How context parallelism exchanges keys and values (Transformer Engine / Megatron-LM
/// --cp-comm-type): P2P a ring of K/V chunks overlapped with per-step attention blocks; A2A
/// an all-to-all of heads (DeepSpeed Ulysses); ALLGATHER K/V gathered once (Llama 3, PyTorch
/// context_parallel's allgather rotation); A2A_P2P all-to-all inside a group, ring across.
enum class CpCommType { P2P, A2A, ALLGATHER, A2A_P2P };

/// A training framework whose defaults a plan takes (strategies/plan/framework_profile.hpp).
enum class Framework { NONE, MEGATRON, NEMO, TORCHTITAN, DEEPSPEED };
/// Which ZeRO-3 design shards the parameters (strategies/step/dp_fsdp.cpp): PyTorch FSDP2
/// (one flat all-gather per block) or DeepSpeed ZeRO-3 (prefetch-bucket-sized gathers).
enum class FsdpImpl { FSDP2, DEEPSPEED };
/// Where DeepSpeed keeps what it offloads (zero_optimization.offload_optimizer /
/// offload_param "device"): on the GPU (NONE) or in host memory (CPU). NVMe is not modelled.
enum class Offload { NONE, CPU };

/// The data-parallel design (strategies/step/dp_lowering.hpp): collectives between one
/// process per GPU (DDP, and ZeRO on top of it), one process driving every GPU of a node
/// (torch.nn.DataParallel), or workers and parameter servers.
enum class DpMode { DDP, DATAPARALLEL, PS };
/// How parameter servers apply the workers' pushes: wait for all (SYNC), apply each at once
/// (ASYNC), let a worker run at most `ps_update_bound` steps ahead of the slowest (SSP,
/// stale synchronous parallel), or let workers train locally and push their parameter delta
/// every `ps_update_bound` steps (GEO).
enum class PsUpdate { SYNC, ASYNC, SSP, GEO };
/// How parameters are dealt to servers: every tensor cut into equal byte ranges, one per
/// server (MXNet's big-array split), or whole tensors round-robin (TensorFlow's default).
enum class PsShard { BYTES, TENSOR };
/// Where parameter servers run: CPU hosts on the fabric, or on worker GPUs (spread evenly).
enum class PsPlacement { HOST, GPU };

/// A fully resolved plan. Defaults are Megatron-LM's where it has one.
struct TrainingPlan {
  int tp = 1;  ///< tensor-parallel size
  int pp = 1;  ///< pipeline-parallel size (stages)
  int dp = 1;  ///< data-parallel size
  int cp = 1;  ///< context-parallel size
  int ep = 1;  ///< expert-parallel size (carved out of dp x cp, as Megatron-core does)
  /// Expert tensor-parallel size (Megatron `--expert-tensor-parallel-size`); 0 = tp, Megatron's
  /// default. Routed experts split by etp, and etp x ep is carved out of tp x dp x cp.
  int etp = 0;
  int vpp = 1;              ///< virtual pipeline stages per rank (interleaved schedule)
  std::int64_t mbs = 1;     ///< micro-batch size, in sequences
  std::int64_t gbs = 0;     ///< global batch size, in sequences; 0 means mbs x dp
  std::int64_t seq = 2048;  ///< sequence length, in tokens
  int zero = 0;             ///< ZeRO stage 0..3 over the data-parallel group (3 = FSDP)
  Recompute recompute = Recompute::NONE;
  SelectiveRecompute selective_recompute = SelectiveRecompute::ATTENTION;
  int recompute_every = 1;  ///< only layers l with (l + 1) % k == 0 recompute (torchtitan option k)
  RecomputeMethod recompute_method = RecomputeMethod::UNIFORM;  ///< full recompute only
  /// Megatron --cpu-offloading-num-layers: the activations the first N layers save for
  /// backward are copied to host memory after their forward and back before their backward
  /// (Transformer Engine's double-buffered CPU offload); 0: none.
  int cpu_offloading_num_layers = 0;
  int recompute_num_layers = 1;  ///< layers per checkpoint (uniform) or per chunk (block)
  /// What `--recompute selective --selective-recompute attention` re-runs (Megatron's
  /// --recompute-modules; its default is core_attn).
  RecomputeModules recompute_modules = module_bit(RecomputeModule::CORE_ATTN);
  CrossEntropy cross_entropy = CrossEntropy::UNFUSED;
  Fusion fusion = Fusion::MEGATRON;  ///< kernel fusion of the memory-bound ops
  AttentionKernel attention_kernel = AttentionKernel::VENDOR;  ///< fused attention implementation
  bool cuda_graphs = false;  ///< kernels replayed from CUDA graphs (no per-launch gap)
  /// What cuda_graphs captures: whole layers (FULL, the default) or Megatron's partial
  /// scopes (--cuda-graph-scope attn moe_router moe_preprocess ...).
  GraphModules cuda_graph_scope = graph_bit(GraphModule::FULL);
  /// Whether CUDA graphs are on and their scope holds `m` (FULL: whole layers).
  bool graphs(GraphModule m) const { return cuda_graphs && (cuda_graph_scope & graph_bit(m)); }
  /// FP8 / NVFP4 weights cast once per step and reused by its other micro-batches
  /// (Transformer Engine's is_first_microbatch cache, which Megatron-core sets); false: every
  /// micro-batch's forward casts them again.
  bool fp8_weight_cache = true;
  /// FP8 scaling recipe of the linears under --precision fp8 (Megatron --fp8-recipe); unset:
  /// the GPU's (delayed on Hopper and Ada, mxfp8 on Blackwell: topo::default_fp8_recipe).
  std::optional<Fp8Recipe> fp8_recipe;
  /// Block-scaled (MXFP8, NVFP4) GEMMs swizzle their operands' scales in a separate kernel
  /// each (Transformer Engine before its GEMM-ready quantisation); false: the quantisation
  /// writes them in the GEMM's layout.
  bool scale_swizzle = false;
  /// Megatron --first-last-layers-bf16: under fp8 / nvfp4 the first
  /// num_layers_at_start_in_bf16 and the last num_layers_at_end_in_bf16 layers (global layer
  /// numbers; a hybrid pattern's every block counts) run their linears in bf16
  /// (layer_in_bf16). Megatron's defaults: off, 1 and 1.
  bool first_last_layers_bf16 = false;
  int num_layers_at_start_in_bf16 = 1;
  int num_layers_at_end_in_bf16 = 1;
  /// The multi-token-prediction modules' linears in bf16 under fp8 / nvfp4 (Megatron-Bridge
  /// keep_mtp_spec_in_bf16); false: they run in the plan's precision.
  bool keep_mtp_in_bf16 = false;
  bool sp = false;  ///< sequence parallelism (with TP)
  bool mtp = true;  ///< run the model's multi-token-prediction modules (if it has any)
  Schedule schedule = Schedule::ONE_F_ONE_B;
  Precision precision = Precision::BF16;
  Optimizer optimizer = Optimizer::ADAM;
  GradDtype grad_dtype = GradDtype::FP32;  ///< gradient accumulation dtype (Megatron main-grad)
  bool overlap_grad_reduce = false;
  bool overlap_param_gather = false;
  bool tp_comm_overlap = false;  ///< TP collectives overlap their GEMMs
  /// EP all-to-alls overlap compute (Megatron --overlap-moe-expert-parallel-comm: the
  /// combined 1F1B schedule pairs one micro-batch's forward with another's backward and
  /// hides each one's dispatch and combine behind the other's compute).
  bool overlap_moe_expert_parallel_comm = false;
  MoeDispatcher moe_dispatcher = MoeDispatcher::ALLTOALL;  ///< MoE token dispatch (ep > 1)
  CpCommType cp_comm_type = CpCommType::P2P;     ///< context-parallel K/V exchange (cp > 1)
  Framework framework = Framework::NONE;         ///< whose defaults fill unset choices (plan/)
  FsdpImpl fsdp_impl = FsdpImpl::FSDP2;          ///< the ZeRO-3 design (zero 3 only)
  bool reshard_after_forward = true;             ///< FSDP2: re-gather blocks in backward
  std::int64_t ds_prefetch_bucket = 50'000'000;  ///< DeepSpeed stage3_prefetch_bucket_size, elems
  std::int64_t ds_reduce_bucket = 500'000'000;   ///< DeepSpeed ZeRO-3 reduce_bucket_size, elems
  /// DeepSpeed stage3_param_persistence_threshold, elements: smaller parameter tensors stay
  /// whole on every rank and are never gathered.
  std::int64_t ds_persistence_threshold = 100'000;
  /// DeepSpeed ZeRO-Offload (zero_optimization.offload_optimizer, zero >= 1): fp32 master
  /// weights, optimizer states and the gradient partition in host memory, the optimizer step
  /// on the CPU (DeepSpeedCPUAdam), gradients and updated parameters over PCIe.
  Offload offload_optimizer = Offload::NONE;
  /// DeepSpeed ZeRO-Infinity parameter offload (zero_optimization.offload_param, zero 3): the
  /// 16-bit parameter partition in host memory, copied to the GPU before each all-gather.
  Offload offload_param = Offload::NONE;
  /// The offloaded host buffers are page-locked (DeepSpeed pin_memory); false: pageable, each
  /// copy staged through the CUDA driver's pinned buffers by a host memcpy.
  bool offload_pin_memory = false;
  bool flash_attention = true;        ///< attention scores never materialised (no s^2 terms)
  double dp_bucket_bytes = 40e6 * 4;  ///< DDP bucket size, in bytes (Megatron: 40M fp32 elems)
  std::vector<int> pipeline_split;    ///< layers per stage; empty means an even split
  double cuda_context_bytes = 0.5 * 1024 * 1024 * 1024;  ///< per-GPU CUDA context, in bytes
  double fragmentation_fraction = 0;  ///< extra reserve beyond the allocator model, fraction
  DpMode dp_mode = DpMode::DDP;       ///< the data-parallel design
  int ps_servers = 1;                 ///< parameter servers (dp_mode PS)
  PsUpdate ps_update = PsUpdate::SYNC;
  int ps_update_bound = 0;  ///< SSP: the staleness bound s (>= 0); GEO: the push interval k (>= 1)
  PsShard ps_shard = PsShard::BYTES;
  PsPlacement ps_placement = PsPlacement::HOST;

  /// tp x pp x dp x cp: the GPUs this plan occupies.
  std::int64_t gpus() const { return std::int64_t{tp} * pp * dp * cp; }
  /// The expert tensor-parallel size: etp, or tp when unset.
  int expert_tp() const { return etp > 0 ? etp : tp; }
  /// Expert data-parallel size: tp x dp x cp / (etp x ep) (Megatron-core expert RankGenerator).
  int expert_dp() const { return tp * dp * cp / (expert_tp() * ep); }
  /// Effective global batch (gbs, or mbs x dp when unset), in sequences.
  std::int64_t global_batch() const { return gbs > 0 ? gbs : mbs * dp; }
  /// Micro-batches per step per pipeline (gradient accumulation steps).
  std::int64_t micro_batches() const { return global_batch() / (mbs * dp); }
};

/// Names as the plan JSON and the CLI spell them ("bf16", "1f1b", "selective", ...).
std::string to_string(Precision value);
std::string to_string(Optimizer value);
std::string to_string(Recompute value);
std::string to_string(Schedule value);
std::string to_string(GradDtype value);
std::string to_string(SelectiveRecompute value);
std::string to_string(RecomputeMethod value);
std::string to_string(CrossEntropy value);
std::string to_string(Framework value);
std::string to_string(Fusion value);
std::string to_string(AttentionKernel value);
std::string to_string(MoeDispatcher value);
std::string to_string(CpCommType value);
std::string to_string(FsdpImpl value);
std::string to_string(Offload value);
std::string to_string(DpMode value);
std::string to_string(PsShard value);
std::string to_string(PsPlacement value);
/// "sync", "async", "ssp:S" or "geo:K" (the --ps-update spelling).
std::string ps_update_text(PsUpdate update, int bound);

/// The names of each enum's values, indexed by value (the plan JSON and the CLI use them).
const std::vector<std::string>& precision_names();
const std::vector<std::string>& optimizer_names();
const std::vector<std::string>& recompute_names();
const std::vector<std::string>& schedule_names();
const std::vector<std::string>& grad_dtype_names();
const std::vector<std::string>& selective_recompute_names();
/// "uniform", "block", in enum order.
const std::vector<std::string>& recompute_method_names();
/// RecomputeModule names as Megatron spells them ("core_attn", "mla_up_proj", ...).
const std::vector<std::string>& recompute_module_names();
/// A RecomputeModules set as a comma list in RecomputeModule order ("" when empty).
std::string recompute_modules_text(RecomputeModules modules);
/// GraphModule names as Megatron spells them ("full", "attn", "mlp", "moe_router",
/// "moe_preprocess"), in enum order.
const std::vector<std::string>& graph_module_names();
/// A GraphModules set as a comma list in GraphModule order ("" when empty).
std::string graph_scope_text(GraphModules scope);
const std::vector<std::string>& cross_entropy_names();
/// "auto" (the GPU's recipe, an unset TrainingPlan::fp8_recipe), then the Fp8Recipe names in
/// enum order ("delayed", "tensorwise", "blockwise", "mxfp8").
const std::vector<std::string>& fp8_recipe_names();
/// The fp8_recipe_names() spelling of `recipe` ("auto" when unset).
std::string fp8_recipe_text(const std::optional<Fp8Recipe>& recipe);
const std::vector<std::string>& framework_names();
const std::vector<std::string>& fusion_names();
const std::vector<std::string>& attention_kernel_names();
const std::vector<std::string>& moe_dispatcher_names();
/// "p2p", "a2a", "allgather", "a2a+p2p" (Megatron's --cp-comm-type spelling), in enum order.
const std::vector<std::string>& cp_comm_type_names();
const std::vector<std::string>& fsdp_impl_names();
/// "none", "cpu" (DeepSpeed's offload device names), in enum order.
const std::vector<std::string>& offload_names();
const std::vector<std::string>& dp_mode_names();
const std::vector<std::string>& ps_shard_names();
const std::vector<std::string>& ps_placement_names();

}  // namespace loom::models
