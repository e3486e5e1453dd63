// A real Megatron-LM launch line through --megatron-args: every flag of Megatron-LM's parser
// known, the cost-relevant ones translated, the model's shape checked against --model or
// built from it, the rest set aside in one list, all errors of a line together.
#include <doctest/doctest.h>

#include <algorithm>

#include "common/error.hpp"
#include "models/model_loader.hpp"
#include "strategies/plan/megatron_flags.hpp"
#include "strategies/plan/plan_import.hpp"
#include "strategies/plan/plan_resolve.hpp"

using namespace loom;
using namespace loom::strategies;

namespace {

// NVIDIA/Megatron-LM examples/llama/train_llama3_8b_h100_fp8.sh at commit
// d98e8a64ddf34856e74b24714e3bedb2f5a39553: the arguments its torchrun line passes to
// pretrain_gpt.py (MODEL_ARGS, TRAINING_ARGS with DDP_ARGS, DTYPE_ARGS for fp8,
// MODEL_PARALLEL_ARGS, the mock-data DATA_ARGS_LIST, EVAL_AND_LOGGING_ARGS), with the
// script's defaults substituted (TP 1, CP 1, MBS 1, GBS 128, 32 layers, seq 8192).
const char* const LLAMA3_8B_FP8 =
    "--use-mcore-models --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 "
    "--num-attention-heads 32 --group-query-attention --num-query-groups 8 --kv-channels 128 "
    "--seq-length 8192 --max-position-embeddings 8192 --position-embedding-type rope "
    "--rotary-base 1000000 --rotary-percent 1.0 --attention-dropout 0.0 --hidden-dropout 0.0 "
    "--swiglu --normalization RMSNorm --init-method-std 0.0134 --attention-backend fused "
    "--apply-layernorm-1p --untie-embeddings-and-output-weights --disable-bias-linear "
    "--micro-batch-size 1 --global-batch-size 128 --train-samples 1953125000 "
    "--lr-decay-samples 1949218748 --lr-warmup-samples 3906252 --lr 0.00015 --min-lr 0.00001 "
    "--decoupled-lr 5.0e-4 --decoupled-min-lr 4.5e-5 --lr-decay-style cosine --clip-grad 1.0 "
    "--weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.95 --bf16 --grad-reduce-in-bf16 "
    "--cross-entropy-loss-fusion --calculate-per-token-loss --manual-gc "
    "--empty-unused-memory-level 1 --exit-duration-in-mins 235 --use-distributed-optimizer "
    "--overlap-grad-reduce --overlap-param-gather --fp8-format hybrid "
    "--fp8-amax-history-len 1024 --fp8-amax-compute-algo max --fp8-param-gather "
    "--tensor-model-parallel-size 1 --context-parallel-size 1 --sequence-parallel "
    "--mock-data --tokenizer-type NullTokenizer --vocab-size 128256 "
    "--data-cache-path /tmp/benchmark_cache_llama3_8b_fp8 --tiktoken-pattern v2 "
    "--split '99,1,0' --no-create-attention-mask-in-dataloader --no-mmap-bin-files "
    "--num-workers 1 --log-interval 1 --eval-iters 32 --eval-interval 100 --save-interval 1000 "
    "--log-throughput --profile --profile-step-start 4 --profile-step-end 6 "
    "--ckpt-format torch_dist --distributed-timeout-minutes 60 "
    "--save checkpoints/llama3_8b_fp8 --load checkpoints/llama3_8b_fp8 "
    "--tensorboard-dir tensorboard_logs/llama3_8b_fp8";

bool holds(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// The messages of every error `args` holds.
std::vector<std::string> errors_of(const std::string& args) {
  try {
    read_megatron_args(args);
  } catch (const MegatronArgsError& e) {
    return e.lines();
  }
  return {};
}

}  // namespace

TEST_CASE("strategies::MegatronLine: the table holds Megatron-LM's whole parser") {
  CHECK(megatron_flag_names().size() > 800);
  CHECK(megatron_flag_arity("--tensorboard-dir") == MegatronArity::VALUE);
  CHECK(megatron_flag_arity("--mock-data") == MegatronArity::SWITCH);
  CHECK(megatron_flag_arity("--cp-comm-type") == MegatronArity::LIST);
  CHECK(megatron_flag_arity("--no-overlap-p2p-communication") == MegatronArity::SWITCH);
  CHECK_FALSE(megatron_flag_arity("--tensorboard-dirs").has_value());
}

TEST_CASE("strategies::MegatronLine: Megatron-LM's Llama 3 8B FP8 example imports in one read") {
  const MegatronLine line = read_megatron_args(LLAMA3_8B_FP8);
  // Translated.
  const models::TrainingPlan p = resolve_plan(line.plan, 8, megatron_model(line));
  CHECK(p.tp == 1);
  CHECK(p.dp == 8);
  CHECK(p.mbs == 1);
  CHECK(p.gbs == 128);
  CHECK(p.seq == 8192);
  CHECK(p.precision == models::Precision::FP8);
  CHECK(p.zero == 1);
  CHECK(p.overlap_grad_reduce);
  CHECK(p.overlap_param_gather);
  CHECK(p.grad_dtype == models::GradDtype::BF16);
  CHECK(p.cross_entropy == models::CrossEntropy::FUSED);
  CHECK_FALSE(p.sp);  // tp 1: validate_args turns it off
  // Set aside, in one list: logging, data, tokenizer, checkpointing, and what loom does not
  // model.
  for (const char* flag :
       {"--tensorboard-dir", "--mock-data", "--num-workers", "--manual-gc",
        "--distributed-timeout-minutes", "--ckpt-format", "--tokenizer-type", "--split",
        "--rotary-base", "--fp8-amax-history-len", "--profile", "--sequence-parallel"}) {
    CAPTURE(flag);
    CHECK(holds(line.ignored, flag));
  }
  // The shape is Llama 3 8B's (Meta's config.json, loom's preset).
  const models::ModelSpec llama = models::model_preset("llama3-8b");
  CHECK(megatron_model_mismatches(line, llama).empty());
  const models::ModelSpec built = megatron_model(line);
  CHECK(built.layers == 32);
  CHECK(built.kv_heads == 8);
  CHECK(built.ffn == 14336);
  CHECK(built.vocab == 128256);
  CHECK(built.mlp == models::MlpKind::SWIGLU);
  CHECK(built.norm == models::NormKind::RMSNORM);
  CHECK_FALSE(built.tied_embeddings);
  CHECK_FALSE(built.linear_bias);
  CHECK_FALSE(built.dropout);
  CHECK(built.max_position_embeddings == 0);
  CHECK(built.default_seq == 8192);
}

TEST_CASE("strategies::MegatronLine: a model that is not the line's is named, field by field") {
  const MegatronLine line = read_megatron_args(LLAMA3_8B_FP8);
  const std::vector<std::string> m =
      megatron_model_mismatches(line, models::model_preset("llama3-70b"));
  REQUIRE(m.size() >= 3);
  CHECK(m[0].find("--num-layers") != std::string::npos);
  CHECK(m[0].find("layers 32") != std::string::npos);
  CHECK(m[1].find("--hidden-size") != std::string::npos);
  // Megatron's defaults stand for what a describing line omits: without --swiglu and
  // --normalization it is a GELU, LayerNorm model.
  const std::vector<std::string> gelu = megatron_model_mismatches(
      read_megatron_args("--num-layers 32 --hidden-size 4096 --num-attention-heads 32 "
                         "--num-query-groups 8 --ffn-hidden-size 14336"),
      models::model_preset("llama3-8b"));
  bool swiglu = false, norm = false;
  for (const auto& msg : gelu) {
    swiglu |= msg.find("--swiglu") != std::string::npos;
    norm |= msg.find("--normalization") != std::string::npos;
  }
  CHECK(swiglu);
  CHECK(norm);
  // A line of parallel flags only says nothing of the model.
  CHECK(megatron_model_mismatches(read_megatron_args("--tensor-model-parallel-size 2"),
                                  models::model_preset("llama3-70b"))
            .empty());
}

TEST_CASE("strategies::MegatronLine: every error of a line, one message each") {
  const std::vector<std::string> e = errors_of(
      "--tensor-model-parallel-size x --tensorbord-dir logs --micro-batch-size "
      "--bf16 --num-distributed-optimizer-instances 2");
  REQUIRE(e.size() == 4);
  CHECK(e[0].find("--tensor-model-parallel-size") != std::string::npos);
  CHECK(e[1].find("did you mean '--tensorboard-dir'") != std::string::npos);
  CHECK(e[2].find("--micro-batch-size needs a value") != std::string::npos);
  CHECK(e[3].find("not modelled") != std::string::npos);
  CHECK_THROWS_AS(import_megatron_args("--bogus"), ValidationError);
  CHECK_THROWS_WITH_AS(megatron_model(read_megatron_args("--num-layers 2 --hidden-size 64")),
                       doctest::Contains("--num-attention-heads"), ValidationError);
}

TEST_CASE("strategies::MegatronLine: the cost-relevant flags translate") {
  // --decoder-first/last-pipeline-num-layers as get_num_layers_to_build splits them
  // (megatron/core/transformer/transformer_block.py): 126 = 6 + 4 x 28 + 8 over pp 6.
  const MegatronLine uneven = read_megatron_args(
      "--num-layers 126 --pipeline-model-parallel-size 6 --decoder-first-pipeline-num-layers 6 "
      "--decoder-last-pipeline-num-layers 8");
  CHECK(uneven.plan.text("pipeline_split") == "6,28,28,28,28,8");
  CHECK(errors_of("--num-layers 126 --pipeline-model-parallel-size 6 "
                  "--decoder-first-pipeline-num-layers 5")
            .size() == 1);
  CHECK(errors_of("--decoder-last-pipeline-num-layers 5").size() == 1);
  // Torch FSDP2 is ZeRO-3 as torch's fully_shard.
  const PlanInput fsdp = import_megatron_args("--use-torch-fsdp2");
  CHECK(fsdp.integer("zero") == 3);
  CHECK(fsdp.text("fsdp_impl") == "fsdp2");
  CHECK(import_megatron_args("--num-virtual-stages-per-pipeline-rank 4").integer("vpp") == 4);
  // What loom models already: grouped expert GEMMs, overlapped pipeline p2p, one optimizer
  // instance.
  const MegatronLine as_is = read_megatron_args(
      "--moe-grouped-gemm --overlap-p2p-communication --num-distributed-optimizer-instances 1");
  CHECK(as_is.plan.canonical().empty());
  CHECK(as_is.ignored.empty());
  // A list flag takes its values with it; --cp-comm-type takes one type for every layer.
  CHECK(read_megatron_args("--cp-comm-type a2a --bf16").plan.text("precision") == "bf16");
  CHECK(errors_of("--cp-comm-type p2p a2a").size() == 1);
  CHECK(errors_of("--cp-comm-type ring").size() == 1);
}
