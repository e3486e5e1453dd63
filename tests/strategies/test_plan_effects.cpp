// Values with no effect in the plan they resolve to are rejected, naming both fields
// (strategies/plan/plan_effects.hpp), one case per class of rule; values equal to their
// default or the --framework profile's pass. And each framework's own refusals
// (plan_rules.cpp check_framework).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "models/flops.hpp"
#include "models/model_loader.hpp"
#include "strategies/plan/plan_input.hpp"
#include "strategies/plan/plan_resolve.hpp"
#include "strategies/plan/plan_rules.hpp"
#include "topologies/cluster_presets.hpp"

using namespace loom;
using namespace loom::strategies;

namespace {

using Values = std::vector<std::pair<std::string, PlanValue>>;

PlanInput flags(const Values& values) {
  PlanInput in;
  in.sources() = PlanSources::command_line();
  for (const auto& [key, value] : values) in.set(key, value);
  return in;
}

// The message resolve_plan throws for `values` on `gpus` GPUs; empty when it accepts them.
std::string rejection(const Values& values, std::optional<std::int64_t> gpus = 8) {
  try {
    resolve_plan(flags(values), gpus, 32);
  } catch (const PlanError& e) {
    return e.what();
  }
  return "";
}

void check_rejected(const Values& values, const std::string& flag, const std::string& other,
                    std::optional<std::int64_t> gpus = 8) {
  const std::string message = rejection(values, gpus);
  CAPTURE(message);
  CHECK(message.rfind(flag, 0) == 0);
  CHECK(message.find(" has no effect ") != std::string::npos);
  CHECK(message.find(other) != std::string::npos);
}

}  // namespace

TEST_CASE("strategies::PlanEffects: ZeRO and DP switches need data-parallel replicas") {
  check_rejected({{"zero", std::int64_t{1}}, {"tp", std::int64_t{8}}}, "--zero", "--dp 1");
  check_rejected({{"overlap_grad_reduce", true}, {"tp", std::int64_t{8}}}, "--overlap-grad-reduce",
                 "--dp");
  check_rejected({{"dp_bucket_size", std::string("40MB")}, {"tp", std::int64_t{8}}},
                 "--dp-bucket-size", "--dp");
  // With cp > 1 ZeRO still shards (over dp x cp): accepted.
  CHECK(rejection({{"zero", std::int64_t{1}}, {"tp", std::int64_t{4}}, {"cp", std::int64_t{2}}})
            .empty());
}

TEST_CASE("strategies::PlanEffects: ZeRO-3 voids the DDP/ZeRO-1/2 switches") {
  check_rejected({{"zero", std::int64_t{3}}, {"overlap_grad_reduce", true}},
                 "--overlap-grad-reduce", "--zero 3");
  check_rejected({{"zero", std::int64_t{3}}, {"overlap_param_gather", true}},
                 "--overlap-param-gather", "--zero 3");
  check_rejected({{"zero", std::int64_t{3}}, {"dp_bucket_size", std::string("40MB")}},
                 "--dp-bucket-size", "--stage3-reduce-bucket-size");
  // DDP gathers no parameters (Megatron-LM: --overlap-param-gather needs the distributed
  // optimizer).
  check_rejected({{"overlap_param_gather", true}}, "--overlap-param-gather", "--zero 0");
  CHECK(rejection({{"zero", std::int64_t{1}}, {"overlap_param_gather", true}}).empty());
}

TEST_CASE("strategies::PlanEffects: ZeRO-3 knobs need ZeRO-3 and their design") {
  check_rejected({{"fsdp_impl", std::string("deepspeed")}}, "--fsdp-impl", "--zero");
  check_rejected({{"reshard_after_forward", false}}, "--reshard-after-forward", "--zero");
  check_rejected({{"zero", std::int64_t{3}},
                  {"fsdp_impl", std::string("deepspeed")},
                  {"reshard_after_forward", false}},
                 "--reshard-after-forward", "--fsdp-impl deepspeed");
  check_rejected(
      {{"zero", std::int64_t{3}}, {"stage3_prefetch_bucket_size", std::int64_t{1000000}}},
      "--stage3-prefetch-bucket-size", "--fsdp-impl fsdp2");
  check_rejected({{"stage3_reduce_bucket_size", std::int64_t{1000000}}},
                 "--stage3-reduce-bucket-size", "--zero");
  CHECK(rejection({{"zero", std::int64_t{3}},
                   {"fsdp_impl", std::string("deepspeed")},
                   {"stage3_reduce_bucket_size", std::int64_t{1000000}}})
            .empty());
}

TEST_CASE("strategies::PlanEffects: selective-recompute choices need selective recompute") {
  check_rejected({{"recompute_modules", std::string("mlp")}}, "--recompute-modules",
                 "--recompute none");
  check_rejected({{"recompute", std::string("full")}, {"selective_recompute", std::string("op")}},
                 "--selective-recompute", "--recompute full");
  check_rejected({{"recompute", std::string("selective")},
                  {"selective_recompute", std::string("op")},
                  {"recompute_modules", std::string("mlp")}},
                 "--recompute-modules", "--selective-recompute op");
  check_rejected({{"recompute_every", std::int64_t{2}}}, "--recompute-every", "--recompute none");
  CHECK(rejection(
            {{"recompute", std::string("selective")}, {"recompute_modules", std::string("mlp")}})
            .empty());
}

TEST_CASE("strategies::PlanEffects: model-parallel switches need their dimension") {
  check_rejected({{"tp_comm_overlap", true}}, "--tp-comm-overlap", "--tp 1");
  check_rejected({{"flash_attention", false}, {"attention_kernel", std::string("fa2")}},
                 "--attention-kernel", "--flash-attention off");
  check_rejected({{"vpp", std::int64_t{2}}}, "--vpp", "--pp 1");
  check_rejected({{"schedule", std::string("zb")}}, "--schedule zb", "--pp 1");
  // GPipe holds every micro-batch's activations even on one stage: it has an effect.
  CHECK(rejection({{"schedule", std::string("gpipe")}}).empty());
  // The FP8 weight cache needs weights cast to a low precision.
  check_rejected({{"fp8_weight_cache", false}}, "--fp8-weight-cache off", "--precision bf16");
  CHECK(rejection({{"fp8_weight_cache", false}, {"precision", std::string("fp8")}}).empty());
  // An FP8 recipe needs FP8 linears; a scale swizzle needs block-scaled ones.
  check_rejected({{"fp8_recipe", std::string("tensorwise")}}, "--fp8-recipe tensorwise",
                 "--precision bf16");
  CHECK(rejection({{"fp8_recipe", std::string("auto")}}).empty());
  CHECK(rejection({{"fp8_recipe", std::string("tensorwise")}, {"precision", std::string("fp8")}})
            .empty());
  check_rejected({{"scale_swizzle", true}}, "--scale-swizzle on", "--precision bf16");
  check_rejected({{"scale_swizzle", true},
                  {"precision", std::string("fp8")},
                  {"fp8_recipe", std::string("tensorwise")}},
                 "--scale-swizzle on", "--precision fp8 and --fp8-recipe tensorwise");
  CHECK(rejection({{"scale_swizzle", true}, {"precision", std::string("nvfp4")}}).empty());
  CHECK(rejection({{"scale_swizzle", true},
                   {"precision", std::string("fp8")},
                   {"fp8_recipe", std::string("mxfp8")}})
            .empty());
  // Layers kept in bf16: only fp8 / nvfp4 quantise linears; the counts need the switch.
  check_rejected({{"first_last_layers_bf16", true}}, "--first-last-layers-bf16",
                 "--precision bf16");
  check_rejected({{"keep_mtp_in_bf16", true}}, "--keep-mtp-in-bf16", "--precision bf16");
  check_rejected(
      {{"num_layers_at_end_in_bf16", std::int64_t{14}}, {"precision", std::string("nvfp4")}},
      "--num-layers-at-end-in-bf16 14", "--first-last-layers-bf16");
  check_rejected({{"first_last_layers_bf16", true},
                  {"num_layers_at_start_in_bf16", std::int64_t{0}},
                  {"num_layers_at_end_in_bf16", std::int64_t{0}},
                  {"precision", std::string("fp8")}},
                 "--first-last-layers-bf16", "no layer is kept");
  CHECK(rejection({{"first_last_layers_bf16", true},
                   {"num_layers_at_end_in_bf16", std::int64_t{14}},
                   {"num_layers_at_start_in_bf16", std::int64_t{0}},
                   {"precision", std::string("nvfp4")}})
            .empty());
  // torchtitan's own default (off) is not the user's choice.
  CHECK(rejection({{"framework", std::string("torchtitan")}}).empty());
  // Its tensor parallelism is always sequence-parallel: sp off with tp > 1 is refused there,
  // accepted under Megatron (where it is a choice) and with tp 1.
  const std::string no_sp =
      rejection({{"framework", std::string("torchtitan")}, {"tp", std::int64_t{2}}, {"sp", false}});
  CHECK(no_sp ==
        "--sp off: torchtitan's tensor parallelism always runs sequence-parallel (apply_tp: "
        "SequenceParallel on the norms); drop it or change --framework");
  CHECK(rejection({{"framework", std::string("megatron")}, {"tp", std::int64_t{2}}, {"sp", false}})
            .empty());
  CHECK(rejection({{"framework", std::string("torchtitan")}, {"sp", false}}).empty());
  // An MLP has no sequence: the profile leaves sp off there (and sp off is no refusal).
  const Values mlp = {{"framework", std::string("torchtitan")}, {"tp", std::int64_t{2}}};
  CHECK_FALSE(resolve_plan(flags(mlp), 8, 32, std::nullopt, false).sp);
  CHECK(resolve_plan(flags(mlp), 8, 32).sp);
  // EP all-to-all overlap needs all-to-alls, and Megatron's combined 1F1B runs only without
  // pipelining or under the interleaved schedule, never with CUDA-graphed layers.
  check_rejected({{"overlap_moe_expert_parallel_comm", true}}, "--overlap-moe-expert-parallel-comm",
                 "--ep");
  check_rejected({{"overlap_moe_expert_parallel_comm", true},
                  {"ep", std::int64_t{2}},
                  {"pp", std::int64_t{2}}},
                 "--overlap-moe-expert-parallel-comm", "--vpp");
  check_rejected({{"overlap_moe_expert_parallel_comm", true},
                  {"ep", std::int64_t{2}},
                  {"gbs", std::int64_t{64}},
                  {"cuda_graphs", true}},
                 "--overlap-moe-expert-parallel-comm", "--cuda-graphs");
  // One micro-batch per replica (8 GPUs, gbs 8): nothing to pair.
  check_rejected({{"overlap_moe_expert_parallel_comm", true},
                  {"ep", std::int64_t{2}},
                  {"gbs", std::int64_t{8}}},
                 "--overlap-moe-expert-parallel-comm", "--gbs");
  // Megatron's TransformerConfig: no full recompute, no "moe" recompute module, bf16/fp16.
  check_rejected({{"overlap_moe_expert_parallel_comm", true},
                  {"ep", std::int64_t{2}},
                  {"gbs", std::int64_t{64}},
                  {"recompute", std::string("full")}},
                 "--overlap-moe-expert-parallel-comm", "--recompute");
  check_rejected({{"overlap_moe_expert_parallel_comm", true},
                  {"ep", std::int64_t{2}},
                  {"gbs", std::int64_t{64}},
                  {"recompute", std::string("selective")},
                  {"recompute_modules", std::string("moe")}},
                 "--overlap-moe-expert-parallel-comm", "--recompute-modules");
  check_rejected({{"overlap_moe_expert_parallel_comm", true},
                  {"ep", std::int64_t{2}},
                  {"gbs", std::int64_t{64}},
                  {"precision", std::string("fp32")}},
                 "--overlap-moe-expert-parallel-comm", "--precision");
  CHECK(rejection({{"overlap_moe_expert_parallel_comm", true},
                   {"ep", std::int64_t{2}},
                   {"gbs", std::int64_t{64}},
                   {"recompute", std::string("selective")},
                   {"precision", std::string("fp8")}})
            .empty());
  CHECK(rejection({{"overlap_moe_expert_parallel_comm", true},
                   {"ep", std::int64_t{2}},
                   {"pp", std::int64_t{2}},
                   {"vpp", std::int64_t{2}},
                   {"gbs", std::int64_t{64}}},
                  16)
            .empty());
  // Megatron-core's CPU offloading: no pipeline parallelism, recompute or CUDA graphs.
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, PlanValue>>{{"pp", std::int64_t{2}},
                                                      {"recompute", std::string("full")},
                                                      {"cuda_graphs", true},
                                                      {"dp_mode", std::string("dataparallel")}}) {
    const std::string message =
        rejection({{"cpu_offloading_num_layers", std::int64_t{4}}, {key, value}});
    CAPTURE(message);
    CHECK(message.rfind("--cpu-offloading-num-layers 4 cannot run", 0) == 0);
  }
  CHECK(rejection({{"cpu_offloading_num_layers", std::int64_t{4}}}).empty());
}

TEST_CASE("strategies::PlanEffects: a partial CUDA-graph scope needs graphs and Megatron's pairs") {
  // Megatron's --cuda-graph-scope: nothing is captured without graphs; full means every module;
  // moe_preprocess is captured only with moe_router (transformer_config.py).
  check_rejected({{"cuda_graph_scope", std::string("attn")}}, "--cuda-graph-scope",
                 "--cuda-graphs");
  CHECK(rejection({{"cuda_graphs", true}, {"cuda_graph_scope", std::string("full,attn")}})
            .rfind("--cuda-graph-scope full,attn: full already captures every module", 0) == 0);
  CHECK(rejection({{"cuda_graphs", true}, {"cuda_graph_scope", std::string("moe_preprocess")}})
            .find("add moe_router") != std::string::npos);
  CHECK(rejection({{"cuda_graphs", true}, {"cuda_graph_scope", std::string("")}})
            .rfind("--cuda-graph-scope is empty", 0) == 0);
  CHECK(rejection({{"cuda_graphs", true}, {"cuda_graph_scope", std::string("attn,lm_head")}})
            .find("lm_head") != std::string::npos);
  CHECK(rejection({{"cuda_graphs", true},
                   {"cuda_graph_scope", std::string("attn,moe_router,moe_preprocess")}})
            .empty());
  // The EP all-to-all overlap runs with partial graphs (Megatron-LM PR #2168), not whole ones.
  CHECK(rejection({{"overlap_moe_expert_parallel_comm", true},
                   {"ep", std::int64_t{2}},
                   {"gbs", std::int64_t{64}},
                   {"cuda_graphs", true},
                   {"cuda_graph_scope", std::string("attn,moe_router")}})
            .empty());
}

TEST_CASE("strategies::PlanEffects: a framework's own defaults and explicit defaults pass") {
  // NeMo turns both DP overlaps on; with one replica they are its defaults, not the user's.
  CHECK(rejection({{"framework", std::string("nemo")}, {"tp", std::int64_t{8}}}).empty());
  // Giving a field its default value is not a no-op to reject.
  CHECK(rejection(
            {{"tp", std::int64_t{8}}, {"overlap_grad_reduce", false}, {"zero", std::int64_t{0}}})
            .empty());
  // A value from a file is named by its file and pointer.
  PlanInput in = flags({{"tp", std::int64_t{8}}});
  in.set("overlap_grad_reduce", true, file_source("plan.json", "/overlap_grad_reduce", "x"));
  CHECK_THROWS_WITH_AS(resolve_plan(in, 8), doctest::Contains("plan.json#/overlap_grad_reduce"),
                       PlanError);
}

TEST_CASE("strategies::PlanEffects: experts and MTP options need a model that has them") {
  const models::ModelSpec dense = models::model_preset("llama3-8b");
  models::TrainingPlan p;
  p.tp = 2;
  p.etp = 1;
  CHECK_THROWS_WITH_AS(validate_plan(dense, p, std::nullopt, PlanSources::command_line()),
                       "--etp 1 has no effect: llama3-8b has no experts; drop it", PlanError);
  p.etp = 0;
  p.mtp = false;
  CHECK_THROWS_WITH_AS(validate_plan(dense, p, std::nullopt, PlanSources::command_line()),
                       doctest::Contains("--mtp off has no effect"), PlanError);
  p.mtp = true;
  p.recompute = models::Recompute::FULL;
  p.pp = 2;
  p.recompute_num_layers = 17;  // Megatron: at most the 16 layers of one pipeline rank
  CHECK_THROWS_WITH_AS(validate_plan(dense, p, std::nullopt, PlanSources::command_line()),
                       doctest::Contains("give 1 to 16"), PlanError);
  p.recompute_num_layers = 16;
  CHECK_NOTHROW(validate_plan(dense, p, std::nullopt, PlanSources::command_line()));
  p.recompute = models::Recompute::NONE;
  p.pp = 1;
  p.recompute_num_layers = 1;
  p.cpu_offloading_num_layers = 32;  // Megatron-core: fewer than the model's 32 layers
  CHECK_THROWS_WITH_AS(validate_plan(dense, p, std::nullopt, PlanSources::command_line()),
                       doctest::Contains("give 0 to 31"), PlanError);
  p.cpu_offloading_num_layers = 0;
  p.overlap_moe_expert_parallel_comm = true;
  CHECK_THROWS_WITH_AS(validate_plan(dense, p, std::nullopt, PlanSources::command_line()),
                       doctest::Contains("--overlap-moe-expert-parallel-comm has no effect"),
                       PlanError);
  p.overlap_moe_expert_parallel_comm = false;
  p.moe_dispatcher = models::MoeDispatcher::FLEX;
  CHECK_THROWS_WITH_AS(validate_plan(dense, p, std::nullopt, PlanSources::command_line()),
                       "--moe-token-dispatcher flex has no effect: llama3-8b has no experts; "
                       "drop it",
                       PlanError);
  // The flex dispatcher is modelled for unsplit routed experts (the recipes' etp 1).
  const models::ModelSpec moe = models::model_preset("qwen3-30b-a3b");
  p.tp = 2;
  p.sp = true;
  p.dp = 2;
  p.ep = 2;
  p.etp = 2;
  CHECK_THROWS_WITH_AS(validate_plan(moe, p, std::nullopt, PlanSources::command_line()),
                       doctest::Contains("--moe-token-dispatcher flex is modelled with --etp 1 "
                                         "only (got 2)"),
                       PlanError);
  p.etp = 1;
  CHECK_NOTHROW(validate_plan(moe, p, std::nullopt, PlanSources::command_line()));
  p.ep = 1;
  CHECK_THROWS_WITH_AS(validate_plan(moe, p, std::nullopt, PlanSources::command_line()),
                       doctest::Contains("flex has no effect with --ep 1"), PlanError);
}

// Megatron's "mamba" CUDA-graph scope captures a whole Mamba layer: one graph launch per pass
// for it, and refused on a model without Mamba layers (as "attn" on one without attention).
TEST_CASE("strategies::PlanEffects: the mamba CUDA-graph scope") {
  const models::ModelSpec nano = models::model_preset("nemotron-3-nano");
  models::TrainingPlan p;
  p.cuda_graphs = true;
  p.cuda_graph_scope = models::graph_bit(models::GraphModule::MAMBA);
  CHECK_NOTHROW(validate_plan(nano, p, std::nullopt, PlanSources::command_line()));
  CHECK_THROWS_WITH_AS(validate_plan(models::model_preset("llama3-8b"), p, std::nullopt,
                                     PlanSources::command_line()),
                       doctest::Contains("has no Mamba layers; drop mamba"), PlanError);
  for (const models::OpCost& op : models::layer_ops(nano, p, 0))
    CHECK(op.graph_module == models::GraphModule::MAMBA);
}

// Megatron-core trains hybrid Mamba-2 models (MambaModel); torchtitan and DeepSpeed do not.
TEST_CASE("strategies::PlanEffects: a hybrid Mamba model needs a Megatron framework") {
  const models::ModelSpec nano = models::model_preset("nemotron-3-nano");
  models::TrainingPlan p;
  for (const auto fw : {models::Framework::TORCHTITAN, models::Framework::DEEPSPEED}) {
    p.framework = fw;
    CHECK_THROWS_WITH_AS(validate_plan(nano, p, std::nullopt, PlanSources::command_line()),
                         doctest::Contains("has Mamba-2 layers, which Megatron-core trains"),
                         PlanError);
  }
  p.framework = models::Framework::NEMO;
  CHECK_NOTHROW(validate_plan(nano, p, std::nullopt, PlanSources::command_line()));
}

TEST_CASE("strategies::PlanRules: each framework's own refusals of ZeRO with pipelines") {
  const models::ModelSpec m = models::model_preset("llama3-8b");
  models::TrainingPlan p;
  p.pp = 2;
  p.dp = 4;
  p.zero = 2;
  p.framework = models::Framework::DEEPSPEED;  // PipelineEngine: ZeRO stage < 2
  CHECK_THROWS_WITH_AS(validate_plan(m, p, 8, PlanSources::command_line()),
                       doctest::Contains("DeepSpeed's pipeline engine supports ZeRO stage 0 or 1"),
                       PlanError);
  p.zero = 1;
  CHECK_NOTHROW(validate_plan(m, p, 8, PlanSources::command_line()));
  p.zero = 3;
  p.framework = models::Framework::MEGATRON;  // --use-torch-fsdp2: pp 1 and ep 1
  CHECK_THROWS_WITH_AS(validate_plan(m, p, 8, PlanSources::command_line()),
                       doctest::Contains("--use-torch-fsdp2"), PlanError);
  p.framework = models::Framework::TORCHTITAN;  // FSDP2 composes with pipeline schedules
  CHECK_NOTHROW(validate_plan(m, p, 8, PlanSources::command_line()));
  p.framework = models::Framework::NONE;
  CHECK_NOTHROW(validate_plan(m, p, 8, PlanSources::command_line()));
}

TEST_CASE("strategies::PlanRules: a partial CUDA-graph scope needs the modules it captures") {
  // Megatron (arguments.py, transformer_config.py): the moe graphs only for MoE layers, the
  // mlp graph only for dense layers, no moe_router graph with the moe recompute module, no
  // layernorm recompute with the graphs that hold the norms, no EP overlap with an mlp graph.
  const auto rejects = [](const models::ModelSpec& m, const models::TrainingPlan& p,
                          const std::string& text) {
    CHECK_THROWS_WITH_AS(validate_plan(m, p, 8, PlanSources::command_line()),
                         doctest::Contains(text.c_str()), PlanError);
  };
  const models::ModelSpec dense = models::model_preset("llama3-8b");
  const models::ModelSpec moe = models::model_preset("qwen3-30b-a3b");  // every layer MoE
  const models::ModelSpec mixed = models::model_preset("deepseek-v3");  // 3 dense layers first
  models::TrainingPlan p;
  p.dp = 8;
  p.cuda_graphs = true;
  p.cuda_graph_scope = models::graph_bit(models::GraphModule::ATTN) |
                       models::graph_bit(models::GraphModule::MOE_ROUTER);
  rejects(dense, p, "llama3-8b has no MoE layers");
  CHECK_NOTHROW(validate_plan(moe, p, 8, PlanSources::command_line()));
  p.cuda_graph_scope |= models::graph_bit(models::GraphModule::MLP);
  rejects(moe, p, "qwen3-30b-a3b has no dense layers");
  p.cuda_graph_scope = models::graph_bit(models::GraphModule::ATTN) |
                       models::graph_bit(models::GraphModule::MOE_ROUTER);
  p.recompute = models::Recompute::SELECTIVE;
  p.recompute_modules = models::module_bit(models::RecomputeModule::MOE);
  rejects(moe, p, "drop moe_router or the moe module from --recompute-modules");
  p.recompute_modules = models::module_bit(models::RecomputeModule::LAYERNORM);
  rejects(moe, p, "drop layernorm from --recompute-modules");
  p.recompute = models::Recompute::NONE;
  // The whole-layer default needs none of this.
  p.cuda_graph_scope = models::graph_bit(models::GraphModule::FULL);
  CHECK_NOTHROW(validate_plan(dense, p, 8, PlanSources::command_line()));
  // EP overlap with an mlp graph (DeepSeek-V3's dense layers).
  models::TrainingPlan overlap;
  overlap.dp = 32;
  overlap.ep = 32;
  overlap.gbs = 256;
  overlap.cuda_graphs = true;
  overlap.overlap_moe_expert_parallel_comm = true;
  overlap.cuda_graph_scope = models::graph_bit(models::GraphModule::ATTN) |
                             models::graph_bit(models::GraphModule::MLP) |
                             models::graph_bit(models::GraphModule::MOE_ROUTER);
  CHECK_THROWS_WITH_AS(validate_plan(mixed, overlap, 32, PlanSources::command_line()),
                       doctest::Contains("drop mlp or --overlap-moe-expert-parallel-comm"),
                       PlanError);
  // Partial graphs are Megatron-core's: not torchtitan's or DeepSpeed's, not DataParallel's.
  models::TrainingPlan other = p;
  other.cuda_graph_scope = models::graph_bit(models::GraphModule::ATTN);
  other.framework = models::Framework::TORCHTITAN;
  rejects(dense, other, "partial CUDA graphs are Megatron-core's, not torchtitan's");
  other.framework = models::Framework::NONE;
  other.dp_mode = models::DpMode::DATAPARALLEL;
  rejects(dense, other, "use full or --dp-mode ddp");
  // A search checks the fixed scope against the model once, before enumerating.
  CHECK_THROWS_WITH_AS(
      check_graph_scope_input(
          flags({{"cuda_graphs", true}, {"cuda_graph_scope", std::string("mlp")}}), moe),
      doctest::Contains("qwen3-30b-a3b has no dense layers"), PlanError);
  CHECK_NOTHROW(check_graph_scope_input(
      flags({{"cuda_graphs", true}, {"cuda_graph_scope", std::string("attn,mlp")}}), dense));
  // An MLP model has no transformer layers to capture in parts.
  const models::ModelSpec mlp = models::model_preset("deep-mlp");
  models::TrainingPlan attn_only;
  attn_only.dp = 8;
  attn_only.cuda_graphs = true;
  attn_only.cuda_graph_scope = models::graph_bit(models::GraphModule::ATTN);
  rejects(mlp, attn_only, "has no transformer layers to capture in parts; use full");
}

TEST_CASE("strategies::PlanRules: CPU offloading needs a CPU to offload to") {
  const models::ModelSpec m = models::model_preset("llama3-8b");
  const auto path = std::filesystem::temp_directory_path() / "loom_test_two_gpus_no_cpu.json";
  std::ofstream(path) << R"({"name": "two", "gpu": "h100-sxm", "nodes": 1, "node": {"vertices": [
      {"name": "gpu0", "kind": "gpu"}, {"name": "gpu1", "kind": "gpu"},
      {"name": "sw", "kind": "nvswitch"}],
    "links": [{"a": "gpu0", "b": "sw", "type": "nvlink4", "lanes": 18},
              {"a": "gpu1", "b": "sw", "type": "nvlink4", "lanes": 18}]}})";
  const topo::Cluster two =
      topo::load_cluster(topo::ClusterRequest{path.string(), std::nullopt, std::nullopt});
  std::filesystem::remove(path);
  models::TrainingPlan p;
  p.dp = 2;
  p.cpu_offloading_num_layers = 2;
  CHECK_THROWS_WITH_AS(validate_plan_on_cluster(m, p, two, PlanSources::command_line()),
                       doctest::Contains("has no CPU vertex to offload to"), PlanError);
}

TEST_CASE("strategies::PlanRules: context parallelism is refused only over a real window") {
  // Ring attention is modelled for full causal attention: a layer windowed below the
  // sequence refuses cp > 1; a window at least the sequence (or only full layers) does not.
  models::ModelSpec m = models::load_model("llama3-8b");
  models::TrainingPlan p;
  p.cp = 2;
  p.dp = 4;
  p.seq = 4096;
  m.sliding_window = 1024;
  CHECK_THROWS_WITH_AS(validate_plan(m, p, std::nullopt, PlanSources::command_line()),
                       doctest::Contains("context parallelism over sliding-window attention"),
                       ValidationError);
  m.sliding_window = 8192;  // longer than the sequence: no layer is windowed
  CHECK_NOTHROW(validate_plan(m, p, std::nullopt, PlanSources::command_line()));
  m.sliding_window = 1024;
  m.sliding_window_pattern = 1;  // every layer full
  CHECK_NOTHROW(validate_plan(m, p, std::nullopt, PlanSources::command_line()));
}
