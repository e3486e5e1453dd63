#include "strategies/plan/framework_profile.hpp"

#include <array>

namespace loom::strategies {

namespace {

// Indexed by models::Framework.
const std::array<FrameworkProfile, 5> PROFILES = {{
    // none: loom's defaults (Megatron-LM's argument defaults).
    {0, false, false, false, models::FsdpImpl::FSDP2, "loom defaults"},
    // Megatron-LM: --overlap-grad-reduce, --overlap-param-gather, --tp-comm-overlap and
    // --use-distributed-optimizer are all store_true flags, off unless given.
    {0, false, false, false, models::FsdpImpl::FSDP2,
     "Megatron-LM megatron/training/arguments.py (store_true flags)"},
    // NeMo 2.0 recipes: MegatronStrategy with DistributedDataParallelConfig(overlap_grad_reduce
    // =True, overlap_param_gather=True), OptimizerConfig(use_distributed_optimizer=True), and
    // the performance recipes' MegatronCommOverlapCallback(tp_comm_overlap=True); its
    // GPTConfig sets cross_entropy_loss_fusion = True (Megatron's fused cross-entropy).
    {1, true, true, true, models::FsdpImpl::FSDP2,
     "NeMo nemo/collections/llm/recipes/llama3_8b.py (trainer, pretrain_performance_"
     "optimizations); nemo/lightning/pytorch/callbacks/megatron_comm_overlap.py; "
     "nemo/collections/llm/gpt/model/base.py (GPTConfig)",
     models::AttentionKernel::VENDOR, models::SelectiveRecompute::ATTENTION,
     models::CrossEntropy::FUSED},
    // torchtitan: data_parallel_shard_degree = -1 (FSDP2 over every data-parallel rank, with
    // its implicit prefetch; torchtitan/models/llama3/infra/parallelize.py apply_fsdp calls
    // fully_shard per block), enable_async_tensor_parallel = False.
    // Attention: torch.nn.functional.scaled_dot_product_attention, whose flash backend is
    // FlashAttention-2 (torchtitan/models/attention.py; PyTorch SDPA docs). Its "selective"
    // activation checkpointing is op-level (selective_ac_option = "op", _save_list in
    // models/llama3/infra/parallelize.py); the loss is torch cross-entropy on fp32 logits
    // (train.py); torch.compile is off by default (job_config.py Compile.enable = False),
    // so the model runs eager: no kernel fusion. Its Float8 linears (torchao Float8Linear)
    // cast the weight in every forward: no cache over a step's micro-batches. Its tensor
    // parallelism always runs the norms sequence-parallel (apply_tp: SequenceParallel() on
    // attention_norm, ffn_norm and norm; the blocks' inputs and outputs Shard(1)), so the
    // activations between TP regions are sharded along the sequence whenever tp > 1. Its
    // context parallelism is PyTorch's context_parallel (ring attention over SDPA,
    // torch/distributed/tensor/experimental/_attention.py) with job_config's
    // context_parallel_rotate_method = "allgather" (_AllGatherRotater: K/V gathered once).
    {3, false, false, false, models::FsdpImpl::FSDP2,
     "torchtitan torchtitan/config/job_config.py (Parallelism, Compile, ActivationCheckpoint); "
     "models/attention.py (SDPA); train.py (loss); models/llama3/infra/parallelize.py (apply_tp)",
     models::AttentionKernel::FA2, models::SelectiveRecompute::OP, models::CrossEntropy::EAGER,
     models::Fusion::NONE, false, true, models::CpCommType::ALLGATHER},
    // DeepSpeed: zero_optimization.stage defaults to 0; overlap_comm defaults to False below
    // ZeRO-3 (True only for stage 3, whose per-unit collectives loom always overlaps). Its
    // stage 3 is DeepSpeed's own ZeRO-3 (deepspeed/runtime/zero/stage3.py and
    // partitioned_param_coordinator.py: prefetch-bucket gathers, reduce buckets).
    // DeepSpeed trains the framework's model modules as they are (e.g. Hugging Face
    // transformers, eager PyTorch): no fused kernels, torch cross-entropy, SDPA attention.
    // Its sequence parallelism is Ulysses (deepspeed/sequence/layer.py DistributedAttention:
    // all-to-alls of heads around the attention).
    {0, false, false, false, models::FsdpImpl::DEEPSPEED,
     "DeepSpeed deepspeed/runtime/zero/config.py (stage, overlap_comm); model code eager; "
     "deepspeed/sequence/layer.py (Ulysses)",
     models::AttentionKernel::FA2, models::SelectiveRecompute::ATTENTION,
     models::CrossEntropy::EAGER, models::Fusion::NONE, false, false, models::CpCommType::A2A},
}};

}  // namespace

const FrameworkProfile& framework_profile(models::Framework framework) {
  return PROFILES[static_cast<size_t>(framework)];
}

}  // namespace loom::strategies
