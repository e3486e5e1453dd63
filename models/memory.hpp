#pragma once
// The memory model: bytes per GPU for each pipeline stage of a plan — weights, gradients
// and optimizer states (precision, optimizer, ZeRO stage, TP/PP/EP placement), activations
// (summed from the op list's saved tensors under TP, SP, CP, recompute and flash
// attention, times the micro-batches a schedule keeps in flight) and the rest (CUDA
// context, communication buffers, allocator fragmentation reserve). docs/memory.md states
// every assumption. Nothing here knows the GPU; callers compare with its capacity.
#include <vector>

#include "models/flops.hpp"
#include "models/model_spec.hpp"
#include "models/training_plan.hpp"

namespace loom::models {

/// Bytes each parameter costs before ZeRO sharding, by kind of state.
struct BytesPerParameter {
  double weights = 0;    ///< the working copy (2 for 16-bit, 4 for fp32)
  double fp8_cache = 0;  ///< fp8 / nvfp4 weight and transpose copies (layer weights only)
  double gradients = 0;  ///< 4 with fp32 accumulation (Megatron main-grad), 2 with 16-bit
  double master = 0;     ///< fp32 master weights under mixed precision
  double states = 0;     ///< optimizer states: Adam 8, SGD with momentum 4, SGD 0
  /// Optimizer bytes (master + states).
  double optimizer() const { return master + states; }
  /// Everything.
  double total() const { return weights + fp8_cache + gradients + master + states; }
};

/// Bytes per parameter under the plan's precision, grad dtype and optimizer.
BytesPerParameter bytes_per_parameter(const TrainingPlan& plan);

/// Model-state bytes per parameter after ZeRO stage `zero` over `dp_group` ranks: weights,
/// gradients and optimizer divided as ZeRO 1/2/3 does (no gather buffers).
BytesPerParameter sharded_bytes_per_parameter(const TrainingPlan& plan, int zero, double dp_group);

/// NCCL's device memory on one GPU of a stage (`first`, `last`: its place in the pipeline),
/// in bytes: one communicator per process group the layout runs collectives on (tp, cp,
/// dp x cp, pp, the tied-embedding group, ep and the expert gradient group), at NCCL's
/// measured memory per communicator, plus an all-to-all's connections to its NVLink peers.
double nccl_communicator_bytes(const ModelSpec& model, const TrainingPlan& plan, bool first,
                               bool last);

/// The "other" line, each part on its own.
struct OtherMemory {
  double cuda_context_bytes = 0;   ///< plan.cuda_context_bytes
  double comm_buffer_bytes = 0;    ///< NCCL per communicator + pipeline send/recv buffers
  double fragmentation_bytes = 0;  ///< caching-allocator gap: one largest transient tensor,
                                   ///< plus plan.fragmentation_fraction of everything else
  double total() const { return cuda_context_bytes + comm_buffer_bytes + fragmentation_bytes; }
};

/// One GPU of one pipeline stage (pipeline rank).
struct StageMemory {
  int stage = 0;
  std::vector<int> layers;             ///< layer indices this rank holds (all its virtual chunks)
  double parameters = 0;               ///< parameters one GPU holds (after TP/EP, before ZeRO)
  double expert_parameters = 0;        ///< of which routed-expert weights
  double weights_bytes = 0;            ///< includes zero3_buffer_bytes
  double zero3_buffer_bytes = 0;       ///< gathered largest unit + its prefetch (ZeRO-3/FSDP)
  double gradients_bytes = 0;          ///< includes zero3_grad_buffer_bytes
  double zero3_grad_buffer_bytes = 0;  ///< FSDP block gradient + reduce-scatter buffers at peak
  double optimizer_bytes = 0;
  double activations_bytes = 0;           ///< everything below summed
  double layer_activation_bytes = 0;      ///< one micro-batch through this rank's layers, stored
  double inflight_microbatches = 0;       ///< micro-batches whose activations are alive at peak
  double embedding_activation_bytes = 0;  ///< first stage: embedding output kept, all in flight
  double head_activation_bytes = 0;       ///< last stage: final norm and LM head inputs
  double logits_bytes = 0;  ///< last stage: the loss's peak (plan.cross_entropy; GPipe: all wait)
  double recompute_working_bytes = 0;  ///< one recomputed layer's rematerialised tensors
  /// plan.cpu_offloading_num_layers: the offloaded layers' stored activations, all in flight,
  /// held in host memory instead (not in total_bytes), and the two layers' worth of them in
  /// transit on the GPU at most (double buffering; in activations_bytes).
  double offloaded_activation_bytes = 0;
  double offload_buffer_bytes = 0;
  ///< activations_bytes holds the larger of logits_bytes and recompute_working_bytes: the two
  ///< peaks happen at different times of the backward.
  /// DeepSpeed offload (plan.offload_optimizer / offload_param): what this GPU's process keeps
  /// in host memory instead (not in total_bytes). Optimizer: the fp32 master weights and
  /// optimizer states of its partition. Gradients: the fp32 gradient partition the CPU step
  /// reads (ZeRO-3: and the partition's accumulation buffer; ZeRO-1/2 with accumulation:
  /// 16-bit accumulation buffers). Parameters: the 16-bit parameter partition (ZeRO-3).
  double host_optimizer_bytes = 0;
  double host_gradient_bytes = 0;
  double host_param_bytes = 0;
  double host_bytes = 0;  ///< the three summed
  OtherMemory other;
  double other_bytes = 0;
  double total_bytes = 0;
};

/// The whole estimate.
struct MemoryReport {
  double parameters = 0;              ///< the model's total parameters
  BytesPerParameter bytes_per_param;  ///< before sharding
  std::vector<StageMemory> stages;    ///< one per pipeline rank
  double peak_bytes = 0;              ///< the largest stage total
  int peak_stage = 0;
  double peak_host_bytes = 0;  ///< the largest stage's host_bytes (DeepSpeed offload), per GPU
};

/// Layers of each virtual stage (pp x vpp entries): plan.pipeline_split, or an even split.
std::vector<int> virtual_stage_layers(const ModelSpec& model, const TrainingPlan& plan);
/// Layer indices each pipeline rank holds; rank r owns virtual stages r, r + pp, ...
std::vector<std::vector<int>> stage_layer_indices(const ModelSpec& model, const TrainingPlan& plan);

/// Activation bytes layer `layer_index` keeps per micro-batch on one GPU under
/// plan.recompute (full: the layer input only; selective: all but the attention core).
double stored_layer_activation_bytes(const ModelSpec& model, const TrainingPlan& plan,
                                     int layer_index);
/// Bytes the optimizer step moves per local parameter (read + write): Adam reads the gradient,
/// fp32 master, m and v (16 B) and writes master, m and v (12 B), plus the 16-bit model copy
/// it writes (2 B) unless training in fp32; SGD with momentum 20 (+2), plain SGD 12 (+2).
double optimizer_step_bytes_per_param(const TrainingPlan& plan);

/// What the memory model reads of one layer's op list under a plan.
struct LayerMemoryFacts {
  double dense_params = 0;             ///< parameters on one GPU outside routed experts
  double expert_params = 0;            ///< routed-expert parameters on one GPU
  double stored_bytes = 0;             ///< activations kept per micro-batch under plan.recompute
  double recompute_working_bytes = 0;  ///< rematerialised in its backward (0 unless recomputed)
  double widest_tensor_bytes = 0;      ///< its largest op output, bytes
};

/// The op-level inputs of the memory model under one plan, computed once: the embedding and
/// head op lists, the facts of each kind of layer (LayerKind, recomputed or not) and the
/// model's parameter count. They depend on the plan only through what the op lists read
/// (tp, cp, ep, etp, mbs, seq, sp, recompute, precision, kernels; pp only through a tied
/// head), not on dp, zero, the schedule or the overlaps: a search reuses them across plans.
struct MemoryOps {
  std::vector<OpCost> embedding;
  std::vector<OpCost> head;
  double total_parameters = 0;  ///< count_parameters(model).total
  /// Facts by [LayerKind][recomputed][in bf16 (layer_in_bf16)]; only the combinations the
  /// model has are filled.
  LayerMemoryFacts layers[LAYER_KINDS][2][2];
  /// Facts of layer `layer_index` under `plan` (the plan memory_ops was built for).
  const LayerMemoryFacts& layer(const ModelSpec& model, const TrainingPlan& plan,
                                int layer_index) const;
};

/// The op-level inputs of estimate_memory for `plan` (see MemoryOps). Calls layer_ops once
/// per kind of layer the model has.
MemoryOps memory_ops(const ModelSpec& model, const TrainingPlan& plan);

/// Memory per GPU for every pipeline stage. `in_flight[stage]` is the number of micro-batches
/// (in units of the stage's full layer set) whose activations the stage holds at its peak;
/// the pipeline schedule decides it (strategies::estimate_memory derives it from the
/// schedule's pass order). Checks the model (validate_model); the plan must keep the plan
/// rules (strategies::validate_plan, which the CLI and the planner call first): models/ does
/// not know them. Throws ValidationError when `in_flight` does not have one entry per stage.
MemoryReport estimate_memory(const ModelSpec& model, const TrainingPlan& plan,
                             const std::vector<double>& in_flight);
/// estimate_memory with its op-level inputs given (`ops` = memory_ops(model, plan') for a
/// plan' that agrees with `plan` on every field the op lists read). Same result, faster.
MemoryReport estimate_memory(const ModelSpec& model, const TrainingPlan& plan,
                             const std::vector<double>& in_flight, const MemoryOps& ops);

}  // namespace loom::models
