// The plan flags: registered from the table, laid over --plan/--deepspeed/--megatron-args,
// and the command line's end of provenance (a flag name or FILE#/pointer in messages).
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "../strategies/plan_test_files.hpp"
#include "cli/plan_flags.hpp"
#include "common/error.hpp"
#include "strategies/plan/plan_json.hpp"
#include "tests/source_path.hpp"

using loom::testing::source_path;

using namespace loom;
using namespace loom::cli;

namespace {

const std::string GPT3_PLAN = source_path("examples/plans/gpt3-175b-1024.json");

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `loom ARGS` from the source root; returns its exit code, stdout and stderr by path.
int run_loom(const std::string& args, const std::string& out, const std::string& err) {
  const std::string cmd = "cd " + std::string(LOOM_SOURCE_DIR) + " && " + LOOM_BINARY + " " + args +
                          " > " + out + " 2> " + err;
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("cli::PlanFlags: the example plan file resolves") {
  PlanFlags f;
  f.plan_file = GPT3_PLAN;
  const models::TrainingPlan p = resolve_plan(f, 1024).plan;
  CHECK(p.tp == 8);
  CHECK(p.pp == 8);
  CHECK(p.dp == 16);
  CHECK(p.micro_batches() == 96);  // 1536 / (1 x 16), the file's gbs
  CHECK(p.recompute == models::Recompute::FULL);
  CHECK(p.precision == models::Precision::FP16);
  CHECK(p.dp_bucket_bytes == doctest::Approx(160e6));
}

TEST_CASE("cli::PlanFlags: explicit flags override the file") {
  PlanFlags f;
  f.plan_file = GPT3_PLAN;
  f.integers["pp"] = 4;
  f.texts["recompute"] = "selective";
  const ResolvedPlan r = resolve_plan(f, 1024);
  CHECK(r.plan.pp == 4);
  CHECK(r.plan.dp == 32);
  CHECK(r.plan.recompute == models::Recompute::SELECTIVE);
  CHECK(r.sources.where("pp") == "--pp");
  CHECK(r.sources.where("tp") == GPT3_PLAN + "#/tp");
}

TEST_CASE("cli::PlanFlags: rules broken by flags name the flag") {
  PlanFlags f;
  f.integers["tp"] = 3;
  CHECK_THROWS_WITH_AS(resolve_plan(f, 8), doctest::Contains("--tp 3 x --pp 1"), ValidationError);
  f = {};
  f.integers["gbs"] = 10;
  f.integers["mbs"] = 4;
  CHECK_THROWS_WITH_AS(resolve_plan(f, 2), doctest::Contains("--gbs 10"), ValidationError);
  f = {};
  f.integers["dp"] = 3;
  CHECK_THROWS_WITH_AS(resolve_plan(f, 8),
                       "--tp 1 x --pp 1 x --dp 3 x --cp 1 = 3 GPUs, but the cluster has 8; change "
                       "the sizes or the cluster so they match",
                       ValidationError);
  f = {};
  f.texts["pipeline_split"] = "10,10";
  f.integers["pp"] = 2;
  CHECK_THROWS_WITH_AS(resolve_plan(f, 8, 24), doctest::Contains("--pipeline-split sums to 20"),
                       ValidationError);
}

TEST_CASE("cli::PlanFlags: --print-config JSON goes back in through --plan unchanged") {
  const std::string dir = test::write_temp_file("keep", "");
  const std::string printed = dir + ".printed.json", again = dir + ".again.json",
                    err = dir + ".err";
  const std::string common = "simulate --model llama3-8b --cluster dgx-h100 --nodes 4 ";
  REQUIRE(run_loom(common + "--tp 4 --pp 2 --vpp 2 --mbs 2 --gbs 64 --seq 4096 --sp --zero 1 "
                            "--recompute selective --precision fp8 --optimizer sgd "
                            "--overlap-grad-reduce --flash-attention off --dp-bucket-size 25MB "
                            "--cuda-context 0.75GiB --fragmentation 7.5 "
                            "--pipeline-split 10,6,8,8 --print-config --format json",
                   printed, err) == 0);
  REQUIRE(run_loom(common + "--plan " + printed + " --print-config --format json", again, err) ==
          0);
  const std::string first = read_all(printed);
  CHECK(first.find("\"vpp\": 2") != std::string::npos);
  CHECK(first.find("\"flash_attention\": false") != std::string::npos);
  CHECK(read_all(again) == first);
  std::remove(printed.c_str());
  std::remove(again.c_str());
  std::remove(err.c_str());
}

TEST_CASE("cli::PlanFlags: a plan file breaking a rule names the file and JSON pointer") {
  const std::string plan = test::write_temp_file("tp3.json", R"({"tp": 3})");
  const std::string out = plan + ".out", err = plan + ".err";
  // Llama-3-8B has 32 heads; tp 3 does not divide them.
  CHECK(run_loom("memory --model llama3-8b --plan " + plan, out, err) == 2);
  CHECK(read_all(err) == "loom: error: " + plan +
                             "#/tp: 3 does not divide model.heads 32; pick a tp that divides "
                             "32\n");
  CHECK(run_loom("simulate --model llama3-8b --cluster dgx-h100 --nodes 1 --plan " + plan, out,
                 err) == 2);
  CHECK(read_all(err).find(plan + "#/tp: ") != std::string::npos);
  std::remove(out.c_str());
  std::remove(err.c_str());
}

TEST_CASE("cli::PlanFlags: --framework fills unset choices; flags, and --no- flags, win") {
  // NeMo 2.0 recipes: distributed optimizer, both DP overlaps, TP comm overlap (perf recipes).
  PlanFlags f;
  f.texts["framework"] = "nemo";
  f.integers["tp"] = 2;
  auto p = resolve_plan(f, 8).plan;
  CHECK(p.framework == models::Framework::NEMO);
  CHECK(p.zero == 1);
  CHECK(p.overlap_grad_reduce);
  CHECK(p.overlap_param_gather);
  CHECK(p.tp_comm_overlap);
  f.switches["tp_comm_overlap"] = -1;  // --no-tp-comm-overlap
  f.integers["zero"] = 0;
  p = resolve_plan(f, 8).plan;
  CHECK_FALSE(p.tp_comm_overlap);
  CHECK(p.zero == 0);
  CHECK(p.overlap_grad_reduce);
  // torchtitan: FSDP2 over every data-parallel rank; no async TP.
  PlanFlags t;
  t.texts["framework"] = "torchtitan";
  p = resolve_plan(t, 8).plan;
  CHECK(p.zero == 3);
  CHECK_FALSE(p.tp_comm_overlap);
  // torchtitan's kernels: SDPA's FlashAttention-2, op-level selective checkpointing, torch
  // cross-entropy on fp32 logits, eager (torch.compile off by default).
  CHECK(p.attention_kernel == models::AttentionKernel::FA2);
  CHECK(p.selective_recompute == models::SelectiveRecompute::OP);
  CHECK(p.cross_entropy == models::CrossEntropy::EAGER);
  CHECK(p.fusion == models::Fusion::NONE);
  t.texts["fusion"] = "compile";  // an explicit choice wins over the profile
  CHECK(resolve_plan(t, 8).plan.fusion == models::Fusion::COMPILE);
  // torchtitan's TP always runs the norms sequence-parallel (apply_tp): on with tp > 1 only;
  // Megatron's --sequence-parallel stays the user's choice, and NeMo's too.
  CHECK_FALSE(p.sp);
  t.integers["tp"] = 2;
  CHECK(resolve_plan(t, 8).plan.sp);
  CHECK_FALSE(resolve_plan(f, 8).plan.sp);
  // Without a profile nothing changes (Megatron-LM's flags default off).
  p = resolve_plan(PlanFlags{}, 8).plan;
  CHECK(p.framework == models::Framework::NONE);
  CHECK(p.zero == 0);
  CHECK_FALSE(p.overlap_grad_reduce);
  CHECK(p.attention_kernel == models::AttentionKernel::VENDOR);
  CHECK(p.fusion == models::Fusion::MEGATRON);
}

TEST_CASE("cli::PlanFlags: a switch's --no- form parses as a negative count") {
  CLI::App app;
  PlanFlags f;
  add_plan_flags(app, f);
  const char* argv[] = {"loom", "--framework", "nemo", "--no-overlap-grad-reduce"};
  app.parse(4, argv);
  CHECK(f.switches["overlap_grad_reduce"] < 0);
  CHECK_FALSE(resolve_plan(f, 8).plan.overlap_grad_reduce);
}
