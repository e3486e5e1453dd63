#pragma once
// Framework profiles (`--framework`): the defaults a training framework applies to the
// choices a plan leaves unset — the ZeRO/FSDP design and the communication overlaps. Every
// choice stays its own field and flag; an explicit value always wins over the profile.
// Each profile cites the framework source its defaults were read from (docs/defaults.md).
#include "models/training_plan.hpp"

namespace loom::strategies {

/// The defaults one framework applies to unset plan fields.
struct FrameworkProfile {
  int zero = 0;                       ///< ZeRO stage / FSDP when dp > 1
  bool overlap_grad_reduce = false;   ///< DP gradient reduction overlapped with backward
  bool overlap_param_gather = false;  ///< ZeRO-1/2 parameter gather overlapped with forward
  bool tp_comm_overlap = false;       ///< TP collectives overlapped with their GEMMs
  models::FsdpImpl fsdp_impl = models::FsdpImpl::FSDP2;  ///< the ZeRO-3 design when zero 3
  const char* source = "";                               ///< where the defaults were read
  /// The fused-attention kernel the framework calls.
  models::AttentionKernel attention_kernel = models::AttentionKernel::VENDOR;
  /// What "selective" recompute means in the framework.
  models::SelectiveRecompute selective_recompute = models::SelectiveRecompute::ATTENTION;
  /// The loss kernel: Megatron-LM's --cross-entropy-loss-fusion is a store_true flag.
  models::CrossEntropy cross_entropy = models::CrossEntropy::UNFUSED;
  models::Fusion fusion = models::Fusion::MEGATRON;  ///< which memory-bound ops are fused
  /// Low-precision weight casts cached over a step (Transformer Engine under Megatron-core).
  bool fp8_weight_cache = true;
  /// Tensor parallelism always shards the activations between its regions along the
  /// sequence (sequence parallelism on with tp > 1, not a separate choice).
  bool sequence_parallel_with_tp = false;
  /// How context parallelism exchanges K/V (--cp-comm-type).
  models::CpCommType cp_comm_type = models::CpCommType::P2P;
};

/// The profile of `framework` (NONE: loom's own defaults, Megatron-LM's flags off).
const FrameworkProfile& framework_profile(models::Framework framework);

}  // namespace loom::strategies
