#include "strategies/plan/plan_effects.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "models/plan_dtypes.hpp"
#include "strategies/plan/framework_profile.hpp"
#include "strategies/plan/plan_rules.hpp"
#include "topologies/kernel_model.hpp"

namespace loom::strategies {
namespace {

// Whether the plan's GEMMs can carry block scales. Without a GPU, auto may be mxfp8 (on
// Blackwell); validate_plan_on_cluster checks the GPU.
bool block_scaled(const models::TrainingPlan& p) {
  return topo::block_scaled_gemm(models::compute_dtype(p.precision),
                                 p.fp8_recipe.value_or(Fp8Recipe::MXFP8));
}

using models::TrainingPlan;

// Checks of one plan: `given(key)` says whether the input set `key` to something other than
// the value it would have without it.
class EffectChecker {
 public:
  EffectChecker(const PlanInput& in, const TrainingPlan& p)
      : in_(in), s_(in.sources()), p_(p), profile_(framework_profile(p.framework)) {}

  void run() const {
    check_zero();
    check_dp_overlaps();
    check_fsdp();
    check_recompute();
    check_cuda_graphs();
    check_model_parallel();
    check_bf16_layers();
  }

 private:
  // Whether `key` was given with a value that differs from `fallback`, what the field would
  // hold without it.
  template <typename T>
  bool given(std::string_view key, const T& value, const T& fallback) const {
    return in_.has(key) && value != fallback;
  }

  // " 40MB", " 3", " off": the value as given (nothing for a switch, whose flag says it all).
  std::string value_text(std::string_view key) const {
    const PlanField& field = plan_field(key);
    if (field.type == FieldType::SWITCH) return "";
    if (field.type == FieldType::TOGGLE) return in_.flag(key) ? " on" : " off";
    if (field.type == FieldType::SIZE || field.type == FieldType::STAGE) {
      const auto n = in_.integer(key);
      return n ? fmt::format(" {}", *n) : "";
    }
    const auto text = in_.text(key);
    return text ? " " + *text : "";
  }

  // "<key> <value> has no effect <why>; drop it or change <other>".
  [[noreturn]] void fail(std::string_view key, std::string_view other,
                         const std::string& why) const {
    fail_field(s_, key,
               fmt::format("{}{} has no effect {}; drop it or change {}", s_.where(key),
                           value_text(key), why, s_.name(other)));
  }

  // Layers and modules kept in bf16: only fp8 / nvfp4 runs quantise linears; the layer counts
  // are read only with --first-last-layers-bf16 (Megatron-core is_first_last_bf16_layer).
  void check_bf16_layers() const {
    const bool low = models::low_precision_linears(p_.precision);
    for (const std::string_view key : {"first_last_layers_bf16", "keep_mtp_in_bf16"}) {
      if (in_.flag(key, false) && !low) {
        fail(key, "precision",
             fmt::format("with {} {}: no linear is quantised", s_.name("precision"),
                         models::to_string(p_.precision)));
      }
    }
    if (p_.first_last_layers_bf16 && low && p_.num_layers_at_start_in_bf16 == 0 &&
        p_.num_layers_at_end_in_bf16 == 0) {
      fail("first_last_layers_bf16", "num_layers_at_end_in_bf16",
           fmt::format("with {} 0 and {} 0: no layer is kept",
                       s_.name("num_layers_at_start_in_bf16"),
                       s_.name("num_layers_at_end_in_bf16")));
    }
    if (p_.first_last_layers_bf16) return;
    const TrainingPlan plain;
    const std::tuple<const char*, int, int> counts[] = {
        {"num_layers_at_start_in_bf16", p_.num_layers_at_start_in_bf16,
         plain.num_layers_at_start_in_bf16},
        {"num_layers_at_end_in_bf16", p_.num_layers_at_end_in_bf16,
         plain.num_layers_at_end_in_bf16}};
    for (const auto& [key, value, fallback] : counts) {
      if (given(key, value, fallback))
        fail(key, "first_last_layers_bf16",
             fmt::format("without {}", s_.name("first_last_layers_bf16")));
    }
  }

  void check_zero() const {
    // ZeRO-Offload on one GPU (stages 1-2 with offload_optimizer) offloads all the same.
    const bool offloaded = p_.offload_optimizer != models::Offload::NONE && p_.zero < 3;
    if (given("zero", p_.zero, profile_.zero) && p_.zero >= 1 && p_.dp * p_.cp == 1 && !offloaded) {
      fail("zero", "dp",
           fmt::format("with {} 1 and {} 1: ZeRO shards over the data-parallel group, here "
                       "one GPU",
                       s_.name("dp"), s_.name("cp")));
    }
  }

  // The data-parallel switches. Without DP replicas nothing is reduced or gathered; ZeRO-3
  // gathers and reduce-scatters per layer, always overlapped.
  void check_dp_overlaps() const {
    const TrainingPlan d;
    const bool grad =
        given("overlap_grad_reduce", p_.overlap_grad_reduce, profile_.overlap_grad_reduce);
    const bool gather =
        given("overlap_param_gather", p_.overlap_param_gather, profile_.overlap_param_gather);
    const bool bucket = given("dp_bucket_size", p_.dp_bucket_bytes, d.dp_bucket_bytes);
    for (const auto& [key, on] : {std::pair<const char*, bool>{"overlap_grad_reduce", grad},
                                  {"overlap_param_gather", gather},
                                  {"dp_bucket_size", bucket}}) {
      if (!on) continue;
      if (p_.dp == 1)
        fail(key, "dp", fmt::format("with {} 1: there is no data-parallel traffic", s_.name("dp")));
      if (p_.zero >= 3) {
        fail(key, "zero",
             fmt::format(
                 "with {} 3: FSDP gathers and reduce-scatters each layer as it runs, "
                 "always overlapped{}",
                 s_.name("zero"),
                 std::string_view(key) == "dp_bucket_size"
                     ? fmt::format(" (its buckets: {})", s_.name("stage3_reduce_bucket_size"))
                     : ""));
      }
    }
    // Megatron-LM: --overlap-param-gather only with the distributed optimizer (arguments.py).
    if (gather && p_.zero == 0) {
      fail("overlap_param_gather", "zero",
           fmt::format("with {} 0: DDP keeps whole parameters and gathers none (ZeRO-1 and 2 "
                       "do)",
                       s_.name("zero")));
    }
  }

  // The ZeRO-3 design and its knobs.
  void check_fsdp() const {
    const TrainingPlan d;
    if (given("fsdp_impl", p_.fsdp_impl, profile_.fsdp_impl) && p_.zero < 3) {
      fail("fsdp_impl", "zero", fmt::format("below {} 3", s_.name("zero")));
    }
    if (given("reshard_after_forward", p_.reshard_after_forward, d.reshard_after_forward)) {
      if (p_.zero < 3)
        fail("reshard_after_forward", "zero", fmt::format("below {} 3", s_.name("zero")));
      if (p_.fsdp_impl != models::FsdpImpl::FSDP2) {
        fail("reshard_after_forward", "fsdp_impl",
             fmt::format("with {} {}: DeepSpeed ZeRO-3 always re-gathers for backward",
                         s_.name("fsdp_impl"), models::to_string(p_.fsdp_impl)));
      }
    }
    for (const auto& [key, on] :
         {std::pair<const char*, bool>{
              "stage3_prefetch_bucket_size",
              given("stage3_prefetch_bucket_size", p_.ds_prefetch_bucket, d.ds_prefetch_bucket)},
          {"stage3_reduce_bucket_size",
           given("stage3_reduce_bucket_size", p_.ds_reduce_bucket, d.ds_reduce_bucket)},
          {"stage3_param_persistence_threshold",
           given("stage3_param_persistence_threshold", p_.ds_persistence_threshold,
                 d.ds_persistence_threshold)}}) {
      if (!on) continue;
      if (p_.zero < 3) fail(key, "zero", fmt::format("below {} 3", s_.name("zero")));
      if (p_.fsdp_impl != models::FsdpImpl::DEEPSPEED) {
        fail(key, "fsdp_impl",
             fmt::format("with {} {}: only DeepSpeed ZeRO-3 has these buckets",
                         s_.name("fsdp_impl"), models::to_string(p_.fsdp_impl)));
      }
    }
  }

  // What selective recompute re-runs matters only under selective recompute.
  void check_recompute() const {
    const TrainingPlan d;
    const bool selective = p_.recompute == models::Recompute::SELECTIVE;
    const std::string mode =
        fmt::format("with {} {}", s_.name("recompute"), models::to_string(p_.recompute));
    if (given("selective_recompute", p_.selective_recompute, profile_.selective_recompute) &&
        !selective)
      fail("selective_recompute", "recompute", mode);
    if (given("recompute_modules", p_.recompute_modules, d.recompute_modules)) {
      if (!selective) fail("recompute_modules", "recompute", mode);
      if (p_.selective_recompute == models::SelectiveRecompute::OP) {
        fail("recompute_modules", "selective_recompute",
             fmt::format("with {} op: torchtitan's op-level policy picks what to keep itself",
                         s_.name("selective_recompute")));
      }
    }
    if (given("recompute_every", p_.recompute_every, d.recompute_every) &&
        p_.recompute == models::Recompute::NONE)
      fail("recompute_every", "recompute", mode);
    // Megatron's method and layer count shape full recompute only (arguments.py asserts no
    // method under selective).
    const bool full = p_.recompute == models::Recompute::FULL;
    if (given("recompute_method", p_.recompute_method, d.recompute_method) && !full)
      fail("recompute_method", "recompute", mode);
    if (given("recompute_num_layers", p_.recompute_num_layers, d.recompute_num_layers) && !full)
      fail("recompute_num_layers", "recompute", mode);
  }

  // Megatron's partial CUDA graphs (--cuda-graph-scope, transformer_config.py checks).
  void check_cuda_graphs() const {
    const TrainingPlan d;
    if (!given("cuda_graph_scope", p_.cuda_graph_scope, d.cuda_graph_scope)) return;
    if (!p_.cuda_graphs)
      fail("cuda_graph_scope", "cuda_graphs",
           fmt::format("with {} off: nothing is captured", s_.name("cuda_graphs")));
    if (p_.cuda_graph_scope == 0)
      fail_field(s_, "cuda_graph_scope",
                 fmt::format("{} is empty; give full or some of attn, mlp, moe_router, "
                             "moe_preprocess, mamba",
                             s_.where("cuda_graph_scope")));
    if (p_.graphs(models::GraphModule::FULL) && p_.cuda_graph_scope != d.cuda_graph_scope)
      fail_field(s_, "cuda_graph_scope",
                 fmt::format("{}: full already captures every module; give full alone or "
                             "the modules alone",
                             cuda_graph_scope_text(p_, s_)));
    if (p_.graphs(models::GraphModule::MOE_PREPROCESS) &&
        !p_.graphs(models::GraphModule::MOE_ROUTER))
      fail_field(s_, "cuda_graph_scope",
                 fmt::format("{}: Megatron captures moe_preprocess only with moe_router; "
                             "add moe_router",
                             cuda_graph_scope_text(p_, s_)));
  }

  void check_model_parallel() const {
    if (given("tp_comm_overlap", p_.tp_comm_overlap, profile_.tp_comm_overlap) && p_.tp == 1) {
      fail("tp_comm_overlap", "tp",
           fmt::format("with {} 1: there are no tensor-parallel collectives", s_.name("tp")));
    }
    if (given("fp8_weight_cache", p_.fp8_weight_cache, profile_.fp8_weight_cache) &&
        !models::low_precision_linears(p_.precision)) {
      fail("fp8_weight_cache", "precision",
           fmt::format("with {} {}: the linears' weights are not cast to a low precision",
                       s_.name("precision"), models::to_string(p_.precision)));
    }
    if (p_.fp8_recipe && p_.precision != models::Precision::FP8) {
      fail("fp8_recipe", "precision",
           fmt::format("with {} {}: no linear runs in FP8", s_.name("precision"),
                       models::to_string(p_.precision)));
    }
    if (p_.scale_swizzle && !block_scaled(p_)) {
      // Under fp8 the recipe is what lacks block scales; otherwise the precision.
      const bool fp8 = p_.precision == models::Precision::FP8;
      fail("scale_swizzle", fp8 ? "fp8_recipe" : "precision",
           fmt::format("with {} {}{}: no GEMM operand carries block scales (mxfp8, nvfp4)",
                       s_.name("precision"), models::to_string(p_.precision),
                       fp8 ? fmt::format(" and {} {}", s_.name("fp8_recipe"),
                                         loom::to_string(*p_.fp8_recipe))
                           : std::string()));
    }
    if (given("attention_kernel", p_.attention_kernel, profile_.attention_kernel) &&
        !p_.flash_attention) {
      fail("attention_kernel", "flash_attention",
           fmt::format("with {} off: attention runs unfused, as batched GEMMs",
                       s_.name("flash_attention")));
    }
    // One stage runs its micro-batches one after another under every schedule; only GPipe's
    // all-forwards-first order changes what it holds (memory).
    if (given("schedule", p_.schedule, TrainingPlan{}.schedule) && p_.pp == 1 &&
        (p_.schedule == models::Schedule::NAIVE || p_.schedule == models::Schedule::ZERO_BUBBLE)) {
      fail("schedule", "pp",
           fmt::format("with {} 1: a single stage has no pipeline to schedule", s_.name("pp")));
    }
    if (given("overlap_moe_expert_parallel_comm", p_.overlap_moe_expert_parallel_comm, false)) {
      if (const auto block = moe_a2a_overlap_block(p_, s_))
        fail("overlap_moe_expert_parallel_comm", block->field, block->why);
    }
    // Megatron-core's TransformerConfig refuses CPU offloading with pipeline parallelism,
    // recompute or CUDA graphs (transformer_config.py __post_init__).
    if (p_.cpu_offloading_num_layers > 0) {
      const auto refuse = [&](std::string_view other, const std::string& with,
                              std::string_view why) {
        fail_field(s_, "cpu_offloading_num_layers",
                   fmt::format("{} {} cannot run {}: {}; drop it or change {}",
                               s_.where("cpu_offloading_num_layers"), p_.cpu_offloading_num_layers,
                               with, why, s_.name(other)));
      };
      constexpr std::string_view megatron =
          "Megatron-core supports CPU offloading only without pipeline parallelism, recompute "
          "or CUDA graphs";
      if (p_.pp > 1) refuse("pp", fmt::format("with {} {}", s_.name("pp"), p_.pp), megatron);
      if (p_.recompute != models::Recompute::NONE)
        refuse("recompute",
               fmt::format("with {} {}", s_.name("recompute"), models::to_string(p_.recompute)),
               megatron);
      if (p_.cuda_graphs) refuse("cuda_graphs", "with CUDA-graphed layers", megatron);
      if (p_.dp_mode != models::DpMode::DDP)
        refuse("dp_mode",
               fmt::format("with {} {}", s_.name("dp_mode"), models::to_string(p_.dp_mode)),
               "CPU offloading is Megatron-core's, and that design has none");
    }
    // Megatron-LM rejects the interleaved schedule below pp 2 (arguments.py).
    if (p_.vpp > 1 && p_.pp == 1) {
      fail(in_.has("vpp") ? "vpp" : "layers_per_virtual_stage", "pp",
           fmt::format("with {} 1: virtual stages interleave pipeline stages, and there is one",
                       s_.name("pp")));
    }
  }

  const PlanInput& in_;
  const PlanSources& s_;
  const TrainingPlan& p_;
  const FrameworkProfile& profile_;
};

}  // namespace

void check_effective(const PlanInput& input, const TrainingPlan& plan) {
  EffectChecker(input, plan).run();
}

namespace {

// The flex dispatcher (DeepEP / HybridEP): a model with experts, an expert group of 2+
// (Megatron's MoEFlexTokenDispatcher asserts "Flex token dispatcher requires TPxEP > 1"; with
// etp 1 that group is the EP group), and the routed experts unsplit, as loom models them
// (the Megatron-Bridge recipes that use it set etp 1).
void check_flex_dispatcher(const models::ModelSpec& m, const TrainingPlan& p,
                           const PlanSources& s) {
  if (p.moe_dispatcher != models::MoeDispatcher::FLEX) return;
  const std::string where = s.where("moe_token_dispatcher");
  if (!m.is_moe()) {
    fail_field(s, "moe_token_dispatcher",
               fmt::format("{} flex has no effect: {} has no experts; drop it", where, m.name));
  }
  if (p.ep == 1) {
    fail_field(s, "moe_token_dispatcher",
               fmt::format("{} flex has no effect with {} 1: no token leaves its GPU; give {} 2 "
                           "or more, or drop it",
                           where, s.name("ep"), s.name("ep")));
  }
  if (p.expert_tp() > 1) {
    fail_field(s, "moe_token_dispatcher",
               fmt::format("{} flex is modelled with {} 1 only (got {}); give {} 1 or use the "
                           "alltoall dispatcher",
                           where, s.name("etp"), p.expert_tp(), s.name("etp")));
  }
}

// --cp-comm-type: an all-to-all of heads needs each of tp x cp ranks to hold whole heads
// (Transformer Engine's a2a CP and DeepSpeed Ulysses assert heads % cp == 0 on the TP
// shard); a2a+p2p runs its all-to-all in sub-groups of the CP group that loom's rank
// layout does not build (Megatron's --hierarchical-context-parallel-sizes).
void check_cp_comm_type(const models::ModelSpec& m, const TrainingPlan& p, const PlanSources& s) {
  if (p.cp <= 1) return;
  const std::string where = s.where("cp_comm_type");
  if (p.cp_comm_type == models::CpCommType::A2A_P2P) {
    fail_field(s, "cp_comm_type",
               fmt::format("{} a2a+p2p (hierarchical CP groups) is not modelled; give p2p, "
                           "a2a or allgather",
                           where));
  }
  if (p.cp_comm_type == models::CpCommType::A2A &&
      (m.heads % (static_cast<std::int64_t>(p.tp) * p.cp) != 0)) {
    fail_field(
        s, "cp_comm_type",
        fmt::format("{} a2a needs the {} heads of {} to divide over {} {} x {} {}; give "
                    "p2p or allgather, or a {} that divides them",
                    where, m.heads, m.name, s.name("tp"), p.tp, s.name("cp"), p.cp, s.name("cp")));
  }
}

}  // namespace

void check_effective_for_model(const models::ModelSpec& m, const TrainingPlan& p,
                               const PlanSources& s) {
  if (!m.is_moe() && p.etp > 0 && p.etp != p.tp) {
    fail_field(s, "etp",
               fmt::format("{} {} has no effect: {} has no experts; drop it", s.where("etp"), p.etp,
                           m.name));
  }
  // Megatron-LM: "recompute_num_layers must be between 1 and num_layers_per_pipeline_rank".
  const int per_rank = std::max(m.layers / std::max(p.pp, 1), 1);
  if (p.recompute == models::Recompute::FULL && p.recompute_num_layers > per_rank) {
    fail_field(s, "recompute_num_layers",
               fmt::format("{} {}: Megatron takes at most the layers of one pipeline rank ({} of "
                           "{} over {} {}); give 1 to {}",
                           s.where("recompute_num_layers"), p.recompute_num_layers, per_rank,
                           m.layers, s.name("pp"), p.pp, per_rank));
  }
  if (p.cpu_offloading_num_layers >= m.layers) {
    fail_field(s, "cpu_offloading_num_layers",
               fmt::format("{} {}: Megatron-core offloads fewer layers than the model has ({}); "
                           "give 0 to {}",
                           s.where("cpu_offloading_num_layers"), p.cpu_offloading_num_layers,
                           m.layers, m.layers - 1));
  }
  if (p.overlap_moe_expert_parallel_comm && !m.is_moe()) {
    fail_field(s, "overlap_moe_expert_parallel_comm",
               fmt::format("{} has no effect: {} has no experts; drop it",
                           s.where("overlap_moe_expert_parallel_comm"), m.name));
  }
  check_flex_dispatcher(m, p, s);
  check_cp_comm_type(m, p, s);
  // Hybrid Mamba-2 models train in Megatron-core (MambaModel); loom's torchtitan and
  // DeepSpeed profiles know transformer blocks only.
  if (m.has_mamba() && (p.framework == models::Framework::TORCHTITAN ||
                        p.framework == models::Framework::DEEPSPEED)) {
    fail_field(s, "framework",
               fmt::format("{} {}: {} has Mamba-2 layers, which Megatron-core trains; use {} "
                           "megatron or nemo",
                           s.where("framework"), models::to_string(p.framework), m.name,
                           s.name("framework")));
  }
  if (p.keep_mtp_in_bf16 && (m.mtp_layers == 0 || !p.mtp)) {
    fail_field(s, "keep_mtp_in_bf16",
               fmt::format("{} has no effect: {}; drop it", s.where("keep_mtp_in_bf16"),
                           m.mtp_layers == 0
                               ? fmt::format("{} has no multi-token-prediction modules", m.name)
                               : fmt::format("{} off runs none", s.name("mtp"))));
  }
  if (!p.mtp && m.mtp_layers == 0) {
    fail_field(s, "mtp",
               fmt::format("{} off has no effect: {} has no multi-token-prediction modules; drop "
                           "it",
                           s.where("mtp"), m.name));
  }
}

std::optional<MoeOverlapBlock> moe_a2a_overlap_block(const TrainingPlan& p, const PlanSources& s) {
  if (p.ep == 1)
    return MoeOverlapBlock{
        "ep", fmt::format("with {} 1: there are no expert-parallel all-to-alls", s.name("ep"))};
  // Megatron-core runs the combined 1F1B schedule without pipelining or under the interleaved
  // one only (pipeline_parallel/schedules.py: combined_1f1b_schedule_for_no_pipelining,
  // combined_1f1b_schedule_for_interleaved_pipelining).
  if (p.pp > 1 && p.vpp <= 1)
    return MoeOverlapBlock{
        "vpp", fmt::format("with {} {} and no virtual stages: Megatron pairs micro-batches only "
                           "without pipelining or under the interleaved schedule",
                           s.name("pp"), p.pp)};
  // The combined schedule pairs one micro-batch's forward with another's backward.
  if (p.micro_batches() < 2)
    return MoeOverlapBlock{"gbs",
                           "with one micro-batch per replica: there is no second micro-batch to "
                           "pair its all-to-alls with"};
  // Whole-layer CUDA graphs freeze the kernel order the pairing interleaves (Megatron asserts
  // the two apart in transformer_layer.py); its partial graphs support the overlap (Megatron-LM
  // PR #2168: attn, moe_router, moe_preprocess).
  if (p.graphs(models::GraphModule::FULL))
    return MoeOverlapBlock{"cuda_graphs",
                           "with CUDA-graphed layers: a graph freezes the order the pairing "
                           "interleaves"};
  // transformer_config.py: "Disable full recomputation when enabling
  // overlap_moe_expert_parallel_comm", and recompute_modules without "moe" (its recompute
  // re-runs the dispatch the pairing splits).
  if (p.recompute == models::Recompute::FULL)
    return MoeOverlapBlock{"recompute",
                           fmt::format("with {} full: a whole-layer checkpoint hides the "
                                       "layer's parts the pairing interleaves",
                                       s.name("recompute"))};
  if (p.recompute == models::Recompute::SELECTIVE &&
      p.selective_recompute == models::SelectiveRecompute::ATTENTION &&
      (p.recompute_modules & models::module_bit(models::RecomputeModule::MOE)))
    return MoeOverlapBlock{"recompute_modules",
                           fmt::format("with {} moe: its recompute re-runs the dispatch the "
                                       "pairing splits",
                                       s.name("recompute_modules"))};
  // transformer_config.py: it runs with bf16 or fp16 only.
  if (p.precision == models::Precision::FP32)
    return MoeOverlapBlock{"precision", fmt::format("with {} fp32: Megatron pairs micro-batches "
                                                    "only in bf16 or fp16 (fp8 and nvfp4 train "
                                                    "in bf16)",
                                                    s.name("precision"))};
  return std::nullopt;
}

}  // namespace loom::strategies
