// Issue 33, "Models users bring": a Hugging Face DeepSpeed config with "auto" values and CPU
// offload through the command line. The configs are Hugging Face's own (examples/plans/
// hf-ds-zero2-offload.json: transformers tests/deepspeed/ds_config_zero2.json; examples/
// plans/hf-ds-zero3-offload.json: the ds_config_zero3.json of the Transformers DeepSpeed
// guide, https://huggingface.co/docs/transformers/deepspeed). loom names each "auto", the
// value it chose and why, in one note; reports the host memory the offload takes and the
// copies and CPU step it costs; refuses what it cannot model by name, with the fix.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "tests/cli/cli_run.hpp"

using loom::testing::check_bad_input;
using loom::testing::Run;
using loom::testing::run_loom;
using loom::testing::TempDir;
using loom::testing::write;

TEST_CASE("cli::deepspeed_offload: memory with the HF ZeRO-3 config notes its autos") {
  const TempDir dir("ds_auto_memory");
  const Run r = run_loom(dir,
                         "memory --model llama3-8b --cluster dgx-h100 --deepspeed "
                         "examples/plans/hf-ds-zero3-offload.json --mbs 2 --gbs 64");
  INFO(r.err);
  INFO(r.out.substr(0, 3000));
  REQUIRE(r.status == 0);
  const std::string note =
      "loom: note: --deepspeed examples/plans/hf-ds-zero3-offload.json: \"auto\" resolved as "
      "Hugging Face's Trainer resolves it (transformers integrations/deepspeed.py)";
  CHECK(r.err.rfind(note, 0) == 0);
  CHECK(r.err.find("train_micro_batch_size_per_gpu = 2 (--mbs; HF "
                   "--per_device_train_batch_size)") != std::string::npos);
  CHECK(r.err.find("gradient_accumulation_steps = 4 (--gbs 64 / (mbs 2 x dp 8)") !=
        std::string::npos);
  CHECK(r.err.find("zero_optimization.reduce_bucket_size = 16777216 (HF hidden_size^2, the "
                   "model's hidden_size 4096)") != std::string::npos);
  CHECK(r.err.find("loom: note: --deepspeed examples/plans/hf-ds-zero3-offload.json: \"auto\" "
                   "left to the Trainer") != std::string::npos);
  // Two note lines, nothing else on stderr.
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 2);
  CHECK(r.out.find("host memory per GPU (DeepSpeed offload, not in the GPU totals): "
                   "optimizer ") != std::string::npos);
  CHECK(r.out.find("host memory per node: ") != std::string::npos);
  CHECK(r.out.find("of the host's 1.82 TiB — fits") != std::string::npos);
}

TEST_CASE("cli::deepspeed_offload: simulate with the HF ZeRO-2 config reports the host work") {
  const TempDir dir("ds_auto_simulate");
  const Run r = run_loom(dir,
                         "simulate --model llama3-8b --cluster dgx-h100 --deepspeed "
                         "examples/plans/hf-ds-zero2-offload.json --gbs 64");
  INFO(r.err);
  INFO(r.out.substr(0, 3000));
  REQUIRE(r.status == 0);
  CHECK(r.err.find("train_micro_batch_size_per_gpu = 1 (loom's default; HF") != std::string::npos);
  CHECK(r.out.find("optimizer step (CPU Adam, host)") != std::string::npos);
  CHECK(r.out.find("host copies (DeepSpeed offload)") != std::string::npos);
  CHECK(r.out.find("host memory per GPU (DeepSpeed offload") != std::string::npos);
  // The JSON says the same: copy time, host bytes, and no optimizer state left on the GPU.
  const Run json = run_loom(dir,
                            "simulate --model llama3-8b --cluster dgx-h100 --deepspeed "
                            "examples/plans/hf-ds-zero2-offload.json --gbs 64 --format json");
  REQUIRE(json.status == 0);
  CHECK(json.out.find("\"offload_copy_time_s\"") != std::string::npos);
  CHECK(json.out.find("\"peak_host_bytes\"") != std::string::npos);
  CHECK(json.out.find("\"optimizer_bytes\": 0") != std::string::npos);
}

TEST_CASE("cli::deepspeed_offload: what loom cannot model is refused by name") {
  const TempDir dir("ds_auto_refuse");
  const std::string nvme = dir.file("nvme.json");
  write(
      nvme,
      R"({"zero_optimization": {"stage": 3, "offload_param": {"device": "nvme", "nvme_path": "/local_nvme"}}})");
  check_bad_input(run_loom(dir, "memory --model llama3-8b --gpus 8 --deepspeed " + nvme),
                  "offload_param/device: invalid value \"nvme\"; allowed: \"cpu\" or \"none\"");
  const std::string sub = dir.file("sub.json");
  write(sub, R"({"zero_optimization": {"stage": 3, "sub_group_size": "auto"}})");
  check_bad_input(run_loom(dir, "memory --model llama3-8b --gpus 8 --deepspeed " + sub),
                  "give zero_optimization.sub_group_size a value");
  check_bad_input(run_loom(dir,
                           "memory --model llama3-8b --gpus 8 --zero 1 --offload-optimizer cpu "
                           "--optimizer sgd"),
                  "--offload-optimizer cpu with --optimizer sgd");
  check_bad_input(run_loom(dir, "memory --model llama3-8b --gpus 8 --offload-pin-memory on"),
                  "--offload-pin-memory on has no effect");
}
