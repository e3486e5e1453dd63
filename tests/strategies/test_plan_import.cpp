// Foreign plan formats (Megatron-LM flags, DeepSpeed JSON) into PlanInput, and the merge of
// sources in precedence order.
#include <doctest/doctest.h>

#include <algorithm>

#include "common/error.hpp"
#include "plan_test_files.hpp"
#include "strategies/plan/plan_import.hpp"
#include "strategies/plan/plan_json.hpp"
#include "strategies/plan/plan_resolve.hpp"
#include "tests/source_path.hpp"

using loom::testing::source_path;

using namespace loom;
using namespace loom::strategies;

TEST_CASE("strategies::PlanImport: Megatron-LM flags translate") {
  const PlanInput in = import_megatron_args(
      "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 "
      "--num-layers-per-virtual-pipeline-stage 5 --micro-batch-size 1 --global-batch-size 512 "
      "--seq-length 4096 --sequence-parallel --recompute-activations --use-distributed-optimizer "
      "--bf16 --overlap-grad-reduce --lr 3e-4 --train-iters=100");
  CHECK(in.integer("tp") == 8);
  CHECK(in.flag("overlap_grad_reduce"));
  const models::TrainingPlan p = resolve_plan(in, 256, 80);
  CHECK(p.tp == 8);
  CHECK(p.pp == 4);
  CHECK(p.vpp == 4);  // 80 layers / (4 stages x 5 layers per chunk)
  CHECK(p.schedule == models::Schedule::INTERLEAVED);
  CHECK(p.dp == 8);
  CHECK(p.seq == 4096);
  CHECK(p.sp);
  CHECK(p.recompute == models::Recompute::SELECTIVE);
  CHECK(p.zero == 1);
  CHECK(p.micro_batches() == 64);
  // Megatron's loss is unfused unless --cross-entropy-loss-fusion (a store_true flag) is given.
  CHECK(p.cross_entropy == models::CrossEntropy::UNFUSED);
  const PlanInput fused = import_megatron_args(
      "--cross-entropy-loss-fusion --cross-entropy-fusion-impl te --global-batch-size 512");
  CHECK(resolve_plan(fused, 256, 80).cross_entropy == models::CrossEntropy::FUSED);
  CHECK_THROWS_AS(import_megatron_args("--cross-entropy-fusion-impl triton"), ValidationError);
  // The communication-overlap switches (store_true in Megatron's arguments.py).
  const PlanInput overlaps = import_megatron_args(
      "--tensor-model-parallel-size 2 --expert-model-parallel-size 4 --tp-comm-overlap "
      "--overlap-moe-expert-parallel-comm");
  CHECK(overlaps.flag("tp_comm_overlap"));
  CHECK(overlaps.flag("overlap_moe_expert_parallel_comm"));
  // The token dispatcher (Megatron --moe-token-dispatcher-type); DeepEP and HybridEP, the
  // flex backends, move the same copies and both permute the tokens received, so the
  // backend is read and set aside.
  const PlanInput flex = import_megatron_args(
      "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep");
  CHECK(resolve_plan(flex, 8).moe_dispatcher == models::MoeDispatcher::FLEX);
  CHECK_THROWS_WITH_AS(
      resolve_plan(import_megatron_args("--moe-token-dispatcher-type allgather"), 8),
      doctest::Contains("valid: alltoall, flex"), PlanError);
  // Group-limited routing is the model's: a shape flag, kept for the model.
  CHECK(read_megatron_args("--moe-router-num-groups 8").shape.size() == 1);
  // Full recompute of the first 5 layers of each chunk (the block method) is kept as such.
  const models::TrainingPlan block =
      resolve_plan(import_megatron_args("--recompute-granularity full --recompute-method block "
                                        "--recompute-num-layers 5 --global-batch-size 8"),
                   8, 32);
  CHECK(block.recompute == models::Recompute::FULL);
  CHECK(block.recompute_method == models::RecomputeMethod::BLOCK);
  CHECK(block.recompute_num_layers == 5);
  // --cpu-offloading-num-layers above 0 offloads, with or without the older releases'
  // --cpu-offloading (today's validate_args: "if args.cpu_offloading_num_layers > 0:
  // args.cpu_offloading = True").
  CHECK(import_megatron_args("--cpu-offloading --cpu-offloading-num-layers 20")
            .integer("cpu_offloading_num_layers") == 20);
  CHECK(
      import_megatron_args("--cpu-offloading-num-layers 20").integer("cpu_offloading_num_layers") ==
      20);
  CHECK_FALSE(import_megatron_args("--cpu-offloading").has("cpu_offloading_num_layers"));
  // --fp8-recipe names the recipe; --fp8-format alone leaves it to auto (the GPU's), so a
  // later --precision bf16 meets no recipe; a name loom lacks is an error.
  const auto recipe_of = [](const std::string& args) {
    return resolve_plan(import_megatron_args(args + " --global-batch-size 8"), 8, 32).fp8_recipe;
  };
  CHECK_FALSE(recipe_of("--fp8-format hybrid").has_value());
  PlanInput bf16 = import_megatron_args("--fp8-format hybrid --global-batch-size 8");
  bf16.set("precision", std::string("bf16"));
  CHECK(resolve_plan(bf16, 8, 32).precision == models::Precision::BF16);
  CHECK(recipe_of("--fp8-format e4m3 --fp8-recipe mxfp8") == Fp8Recipe::MXFP8);
  CHECK(recipe_of("--fp8-recipe tensorwise --fp8-format hybrid") == Fp8Recipe::TENSORWISE);
  CHECK_FALSE(recipe_of("--bf16").has_value());
  // Without --fp8-format Megatron ignores --fp8-recipe; loom's own "auto" is no Megatron name.
  CHECK_FALSE(recipe_of("--bf16 --fp8-recipe delayed").has_value());
  CHECK_THROWS_WITH_AS(recipe_of("--fp8-format hybrid --fp8-recipe custom"),
                       doctest::Contains("custom"), ValidationError);
  CHECK_THROWS_AS(recipe_of("--fp8-format hybrid --fp8-recipe auto"), ValidationError);
  // CUDA graphs: --enable-cuda-graph or --cuda-graph-impl local capture whole layers;
  // transformer_engine with --cuda-graph-scope (nargs '+') the listed scopes.
  CHECK(import_megatron_args("--enable-cuda-graph").flag("cuda_graphs"));
  CHECK(import_megatron_args("--cuda-graph-impl local").flag("cuda_graphs"));
  CHECK_FALSE(import_megatron_args("--cuda-graph-impl none").has("cuda_graphs"));
  const PlanInput partial = import_megatron_args(
      "--cuda-graph-impl transformer_engine --cuda-graph-scope attn moe_router moe_preprocess "
      "--bf16");
  CHECK(partial.flag("cuda_graphs"));
  CHECK(partial.text("cuda_graph_scope") == "attn,moe_router,moe_preprocess");
  CHECK_THROWS_WITH_AS(import_megatron_args("--cuda-graph-scope moe"),
                       doctest::Contains("loom does not model moe or full_iteration"),
                       ValidationError);
  // The Nemotron 3 Nano recipe's scopes (nemotron_3_workload_base_configs.py).
  CHECK(import_megatron_args("--cuda-graph-scope attn mamba moe_router moe_preprocess")
            .text("cuda_graph_scope") == "attn,mamba,moe_router,moe_preprocess");
  CHECK_THROWS_WITH_AS(import_megatron_args("--cuda-graph-scope --bf16"),
                       doctest::Contains("--cuda-graph-scope needs a value"), ValidationError);
  CHECK_THROWS_AS(import_megatron_args("--cuda-graph-impl cudagraph"), ValidationError);
}

TEST_CASE("strategies::PlanImport: Megatron model-shape flags are kept for the model") {
  // The sliding window is the model's (model.sliding_window), as the layer count is: kept
  // aside from the plan, to check --model against or build it.
  for (const char* args : {"--num-layers 32", "--window-size 128,0", "--window-attn-skip-freq 2"}) {
    CAPTURE(args);
    const MegatronLine line = read_megatron_args(args);
    CHECK(line.shape.size() == 1);
    CHECK(line.plan.canonical().empty());
  }
}

TEST_CASE("strategies::PlanImport: unknown Megatron flag is an error with did-you-mean") {
  CHECK_THROWS_WITH_AS(import_megatron_args("--tensor-model-paralel-size 2"),
                       doctest::Contains("did you mean '--tensor-model-parallel-size'"),
                       ValidationError);
  CHECK_THROWS_AS(import_megatron_args("--micro-batch-size"), ValidationError);
  CHECK_THROWS_AS(import_megatron_args("--micro-batch-size two"), ValidationError);
}

TEST_CASE("strategies::PlanImport: DeepSpeed JSON translates") {
  const PlanInput in = import_deepspeed_json(source_path("examples/plans/deepspeed-zero2.json"));
  const models::TrainingPlan p = resolve_plan(in, 16);
  CHECK(p.mbs == 2);
  CHECK(p.dp == 16);
  CHECK(p.global_batch() == 2 * 16 * 4);
  CHECK(p.zero == 2);
  CHECK(p.precision == models::Precision::BF16);
  CHECK(p.recompute == models::Recompute::FULL);
  CHECK(p.overlap_grad_reduce);
  CHECK(p.dp_bucket_bytes == doctest::Approx(100e6));
}

TEST_CASE("strategies::PlanImport: DeepSpeed batch arithmetic must agree") {
  const std::string ds = test::write_temp_file(
      "ds.json",
      R"({"train_batch_size": 100, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4})");
  CHECK_THROWS_WITH_AS(
      resolve_plan(import_deepspeed_json(ds), 16),
      doctest::Contains((ds + "#/train_batch_size: train_batch_size 100 contradicts").c_str()),
      PlanError);
  const std::string typo =
      test::write_temp_file("ds2.json", R"({"zero_optimization": {"stag": 2}})");
  CHECK_THROWS_WITH_AS(import_deepspeed_json(typo), doctest::Contains("did you mean 'stage'"),
                       ConfigError);
}

TEST_CASE("strategies::PlanImport: a later source wins and takes over the naming") {
  const std::string path = test::write_temp_file("base.json", R"({"tp": 3, "gbs": 64})");
  PlanInput in = read_plan_json(path);
  CHECK(in.sources().where("tp") == path + "#/tp");
  in.merge(import_megatron_args("--tensor-model-parallel-size 2"));
  CHECK(in.integer("tp") == 2);
  CHECK(in.sources().where("tp") == "tp");  // named as if given directly
  PlanInput accum;
  accum.set("grad_accum", std::int64_t{2});
  in.merge(accum);  // grad_accum given later replaces the file's gbs
  CHECK_FALSE(in.has("gbs"));
  CHECK(resolve_plan(in, 8).global_batch() == 1 * 4 * 2);
}

// Megatron-core's get_num_layers_to_build (megatron/core/transformer/transformer_block.py):
// the embedding and the loss count as one layer each, the total divides evenly over the
// pp x vpp model chunks, and the first and last chunks build one transformer layer fewer.
TEST_CASE("strategies::PlanImport: Megatron's pipeline-split accounting places the layers") {
  // Llama 3.1 405B as Megatron-Bridge's GB200 NVFP4 recipe runs it (llama31_perf.py:
  // pp 16 x vpp 8 = 128 chunks for 126 layers): the first chunk holds the embedding alone,
  // the last the loss alone, every other one layer.
  // Megatron flags with both accounting switches, resolved for `gpus` and `layers`.
  const auto accounted = [](const std::string& layout, std::int64_t gpus, int layers) {
    return resolve_plan(import_megatron_args(layout + " --account-for-embedding-in-pipeline-split"
                                                      " --account-for-loss-in-pipeline-split"
                                                      " --global-batch-size 64"),
                        gpus, layers);
  };
  const models::TrainingPlan p = accounted(
      "--pipeline-model-parallel-size 16 --virtual-pipeline-model-parallel-size 8", 128, 126);
  REQUIRE(p.pipeline_split.size() == 128);
  CHECK(p.pipeline_split.front() == 0);
  CHECK(p.pipeline_split.back() == 0);
  CHECK(std::count(p.pipeline_split.begin(), p.pipeline_split.end(), 1) == 126);
  // Megatron's --num-layers-per-virtual-pipeline-stage counts them too: 128 units, 1 per chunk.
  const models::TrainingPlan lpvs = accounted(
      "--pipeline-model-parallel-size 16 --num-layers-per-virtual-pipeline-stage 1", 128, 126);
  CHECK(lpvs.vpp == 8);
  CHECK(lpvs.pipeline_split == p.pipeline_split);
  // Qwen3-235B-A22B (94 layers) over pp 8 x vpp 4: (94 + 2) / 32 = 3 per chunk, 2 at the ends.
  const models::TrainingPlan q = accounted(
      "--pipeline-model-parallel-size 8 --virtual-pipeline-model-parallel-size 4", 256, 94);
  CHECK(q.pipeline_split.front() == 2);
  CHECK(q.pipeline_split.back() == 2);
  CHECK(q.pipeline_split[1] == 3);
  CHECK(q.pipeline_split[30] == 3);
  // The embedding alone: 31 layers + 1 over 4 stages, 7 on the first.
  PlanInput emb;
  emb.set("pp", std::int64_t{4});
  emb.set("account_for_embedding_in_pipeline_split", true);
  CHECK(resolve_plan(emb, 4, 31).pipeline_split == std::vector<int>{7, 8, 8, 8});

  // Refused: a total the chunks do not divide, a split given as well, no model. With one
  // chunk they place nothing (Megatron builds every layer there).
  CHECK_THROWS_WITH_AS(resolve_plan(emb, 4, 32),
                       doctest::Contains("33 do not divide over pp 4 x vpp 1 = 4"), PlanError);
  PlanInput with_split = emb;
  with_split.set("pipeline_split", std::string("8,8,8,7"));
  CHECK_THROWS_WITH_AS(resolve_plan(with_split, 4, 31),
                       doctest::Contains("both place the layers; give only one"), PlanError);
  PlanInput one = emb;
  one.set("pp", std::int64_t{1});
  CHECK(resolve_plan(one, 1, 31).pipeline_split.empty());  // one chunk: nothing to place
  CHECK_THROWS_WITH_AS(resolve_plan(emb, 4, std::nullopt),
                       doctest::Contains("needs the model's layer count"), PlanError);
}

TEST_CASE("strategies::PlanImport: Megatron's first/last bf16 layers translate") {
  // Megatron-LM arguments.py: --first-last-layers-bf16 with --num-layers-at-start-in-bf16 and
  // --num-layers-at-end-in-bf16 (defaults 1 and 1).
  const models::TrainingPlan p = resolve_plan(
      import_megatron_args("--fp8-format hybrid --first-last-layers-bf16 "
                           "--num-layers-at-start-in-bf16 0 --num-layers-at-end-in-bf16 14"),
      8, 88);
  CHECK(p.first_last_layers_bf16);
  CHECK(p.num_layers_at_start_in_bf16 == 0);
  CHECK(p.num_layers_at_end_in_bf16 == 14);
  const models::TrainingPlan d =
      resolve_plan(import_megatron_args("--fp8-format hybrid --first-last-layers-bf16"), 8, 88);
  CHECK(d.num_layers_at_start_in_bf16 == 1);
  CHECK(d.num_layers_at_end_in_bf16 == 1);
}
