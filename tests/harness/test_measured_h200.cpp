// loom against what one real NVIDIA H200 measured: tests/validation/measured/h200-2026-11-28,
// written unedited by scripts/device-check on 2026-11-28 (its README names the machine and
// software). The step is a real Hugging Face transformers training step of a Llama-shaped
// 1.24B model (examples/models/llama3.2-1b.json: Llama 3.2 1B's config.json shape), one GPU,
// 2 x 4,096 tokens, FP32 master weights under BF16 autocast, fused AdamW, SDPA attention,
// eager and torch.compile. loom simulates the same step on examples/clusters/one_h200.json
// with --fusion none (PyTorch eager) and --fusion compile; docs/calibration.md ("Measured on
// a real GPU") tabulates the comparison. Tolerances are what loom meets today with a margin,
// so a change that moves loom away from the measurement fails here.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <string>

#include "tests/harness/run_loom.hpp"
#include "tests/source_path.hpp"
#include "tests/temp_dir.hpp"

using loom::testing::run_loom;
using loom::testing::source_path;
using Json = nlohmann::json;

namespace {

const std::string MEASURED = "tests/validation/measured/h200-2026-11-28/";

Json read_json(const std::string& relative) {
  std::ifstream in(source_path(relative));
  REQUIRE(in.good());
  return Json::parse(in);
}

// The plan of a measured step: one H200, one micro-batch, no parallelism.
std::string step_args(const std::string& fusion, int seq = 4096, int micro_batch = 2) {
  const std::string mbs = std::to_string(micro_batch);
  return "simulate --model " + source_path("examples/models/llama3.2-1b.json") + " --cluster " +
         source_path("examples/clusters/one_h200.json") + " --mbs " + mbs + " --gbs " + mbs +
         " --seq " + std::to_string(seq) + " --fusion " + fusion + " --format json";
}

Json loom_json(const std::string& args) {
  const loom::testing::LoomRun run = run_loom(args + " 2>/dev/null");
  REQUIRE_MESSAGE(run.status == 0, run.out);
  return Json::parse(run.out);
}

// The measured run of torch_step.json with this sequence length, micro-batch and mode.
Json measured_run(int seq, int micro_batch, const std::string& mode) {
  const Json step = read_json(MEASURED + "torch_step.json");
  for (const Json& run : step["runs"]) {
    if (run["seq"] == seq && run["micro_batch"] == micro_batch && run["mode"] == mode) return run;
  }
  FAIL("no measured run " << seq << " x " << micro_batch << " " << mode);
  return {};
}

// loom's kernel seconds of one step per op kind (matmul, attention, ...) from --ops: each op
// list's forward and both backward halves, times the layers alike.
std::map<std::string, double> seconds_by_kind(const Json& ops) {
  std::map<std::string, double> by_kind;
  for (const Json& list : ops["results"]["op_lists"]) {
    const double alike = list["alike"];
    for (const Json& op : list["ops"]) {
      by_kind[op["kind"]] +=
          alike * (op["forward_s"].get<double>() + op["backward_input_s"].get<double>() +
                   op["backward_weight_s"].get<double>());
    }
  }
  return by_kind;
}

// The measured per-class kernel seconds per step of a Kineto trace as loom imports it: the mean
// over its profiled steps (the script synchronises before each prof.step(), so every step
// holds its own kernels: 2,837 activities each).
std::map<std::string, double> trace_classes(const std::string& trace) {
  const loom::testing::TempDir dir("measured");
  const std::string profile = dir.file("trace.json");
  const loom::testing::LoomRun run =
      run_loom("calibrate import " + source_path(MEASURED + trace) + " -o " + profile);
  REQUIRE_MESSAGE(run.status == 0, run.out);
  const Json summary = Json::parse(std::ifstream(profile))["trace_summaries"][0];
  std::map<std::string, double> classes;
  const double steps = static_cast<double>(summary["steps"].size());
  for (const Json& step : summary["steps"]) {
    for (const Json& c : step["classes"]) {
      classes[c["class"]] += c["time_us"].get<double>() * 1e-6 / steps;
    }
  }
  return classes;
}

double error(double predicted, double measured) {
  return predicted / measured - 1;
}

}  // namespace

TEST_CASE("harness::Measured: every file the device check wrote is read by loom") {
  for (const char* file : {"harness_gemm.json", "harness_gemm_fp8.json", "harness_memory.json",
                           "harness_launch.json"}) {
    CAPTURE(file);
    const loom::testing::LoomRun run = run_loom("calibrate show " + source_path(MEASURED + file));
    CHECK_MESSAGE(run.status == 0, run.out);
  }
  const Json gemm = read_json(MEASURED + "harness_gemm.json");
  CHECK(gemm["device"]["name"] == "NVIDIA H200");
  CHECK(gemm["harness"]["clock_warmup"]["steady"] == true);
  CHECK(gemm["gemm"].size() == 110);  // every line of scripts/device_check_shapes.txt, BF16
  CHECK(read_json(MEASURED + "harness_gemm_fp8.json")["gemm"].size() == 110);  // and FP8
  CHECK(trace_classes("torch_step_eager.pt.trace.json.gz").count("gemm") == 1);
  CHECK(trace_classes("torch_step_compile.pt.trace.json.gz").count("gemm") == 1);
}

TEST_CASE("harness::Measured: the real H200 training step against loom, uncalibrated") {
  struct Case {
    int seq, micro_batch;
    const char *mode, *fusion;
    double tolerance;
  };
  // Measured (median of 10 steps): eager 192.4 ms at 4096 x 2 and 183.5 ms at 2048 x 4,
  // compiled 178.6 ms. loom predicted 174.7, 165.3 and 152.2 ms when this test was written
  // (-9 %, -10 %, -15 %): loom's GEMMs are slow and HF eager's elementwise work (autocast
  // casts of the FP32 weights, FP32 gradient accumulation, the FP32 logits of the loss) is
  // under-counted by more (the per-class cases below).
  for (const Case& c : {Case{4096, 2, "eager", "none", 0.15}, Case{2048, 4, "eager", "none", 0.15},
                        Case{4096, 2, "compile", "compile", 0.20}}) {
    CAPTURE(c.seq);
    CAPTURE(c.mode);
    const double measured = measured_run(c.seq, c.micro_batch, c.mode)["step"]["median_s"];
    const double predicted =
        loom_json(step_args(c.fusion, c.seq, c.micro_batch))["results"]["step_time_s"];
    MESSAGE("step ", c.seq, " x ", c.micro_batch, " ", std::string(c.mode), ": measured ",
            measured * 1e3, " ms, loom ", predicted * 1e3, " ms (",
            error(predicted, measured) * 100, " %)");
    CHECK(std::abs(error(predicted, measured)) < c.tolerance);
  }
}

TEST_CASE("harness::Measured: GEMM and attention time of the step, model and harness") {
  // The eager step's Kineto trace: GEMM kernels 76.3 ms, attention 20.2 ms per step, the
  // GEMMs at 670-855 TFLOP/s. loom's datasheet kernel model gave 95.6 and 21.6 ms when this
  // test was written (+25 %, +7 %). With the harness's GEMM sweep as --calibration (every GEMM
  // of the step is a measured shape: scripts/device_check_shapes.txt holds the 1.2B model's)
  // the GEMMs take 89.0 ms (+17 %): the harness times each GEMM cold, behind an L2 flush
  // and at the clocks back-to-back GEMMs settle to under the 700 W limit (1500 MHz after the
  // warm-up), while in the step a GEMM often finds its input in the 60 MB L2, just written by
  // the kernel before it, and the clocks run higher between memory-bound kernels. The
  // calibrated figure must stay the closer of the two.
  const std::map<std::string, double> measured = trace_classes("torch_step_eager.pt.trace.json.gz");
  const std::map<std::string, double> plain =
      seconds_by_kind(loom_json(step_args("none") + " --ops"));
  const std::string calibration = " --calibration " + source_path(MEASURED + "harness_gemm.json");
  const std::map<std::string, double> calibrated =
      seconds_by_kind(loom_json(step_args("none") + " --ops" + calibration));
  for (const auto& kinds :
       {std::pair<std::string, std::string>{"matmul", "gemm"}, {"attention", "attention"}}) {
    const std::string& kind = kinds.first;  // named: clang 14 cannot capture a binding
    const std::string& cls = kinds.second;
    CAPTURE(kind);
    const double m = measured.at(cls), p = plain.at(kind), c = calibrated.at(kind);
    MESSAGE(kind, ": trace ", m * 1e3, " ms, loom ", p * 1e3, " ms (", error(p, m) * 100,
            " %), harness-calibrated ", c * 1e3, " ms (", error(c, m) * 100, " %)");
    CHECK(std::abs(error(p, m)) < (kind == "matmul" ? 0.30 : 0.15));
  }
  const double traced = measured.at("gemm");
  CHECK(std::abs(error(calibrated.at("matmul"), traced)) <
        std::abs(error(plain.at("matmul"), traced)));
  CHECK(std::abs(error(calibrated.at("matmul"), traced)) < 0.20);
  const double step = loom_json(step_args("none") + calibration)["results"]["step_time_s"];
  const double measured_step = measured_run(4096, 2, "eager")["step"]["median_s"];
  MESSAGE("step, harness-calibrated: ", step * 1e3, " ms against ", measured_step * 1e3,
          " ms measured (", error(step, measured_step) * 100, " %)");
  CHECK(std::abs(error(step, measured_step)) < 0.20);
}

TEST_CASE("harness::Measured: the device check's one profile, every kernel fitted") {
  // calibration.json: scripts/device_check_profile.py's merge of the harness's GEMM (BF16,
  // FP8), memory and launch profiles and the SDPA sweep (cuDNN's kernels, as in the step).
  // simulate --calibration fits the kernel model's parameters to it and says which kernels
  // used them. When this test was written: step 176 ms (-8.5 %, against -9.2 % uncalibrated);
  // attention 24.7 ms against 20.2 ms in the trace (+23 %; uncalibrated +7 %): the fitted
  // backward ratio of head dimension 64 is pulled down by the sweep's short sequences, whose
  // backward is slower than its FLOPs say (its dO·O, dQ-conversion and head-reduction kernels
  // move b·h·s·d bytes whatever the sequence; loom's attention model has no such term:
  // docs/calibration.md "Measured on a real GPU"). The bound keeps that gap from growing.
  const std::string calibration = " --calibration " + source_path(MEASURED + "calibration.json");
  const Json run = loom_json(step_args("none") + calibration);
  const Json& used = run["context"]["kernel_fit"];
  for (const char* kernel : {"bf16 GEMMs", "fused attention", "per-kernel overhead"}) {
    CAPTURE(kernel);
    CHECK(std::find(used["fitted"].begin(), used["fitted"].end(), kernel) != used["fitted"].end());
  }
  const double step = run["results"]["step_time_s"];
  const double measured = measured_run(4096, 2, "eager")["step"]["median_s"];
  MESSAGE("step, device-check profile: ", step * 1e3, " ms against ", measured * 1e3,
          " ms measured (", error(step, measured) * 100, " %)");
  CHECK(std::abs(error(step, measured)) < 0.15);
  const std::map<std::string, double> traced = trace_classes("torch_step_eager.pt.trace.json.gz");
  const std::map<std::string, double> fitted =
      seconds_by_kind(loom_json(step_args("none") + " --ops" + calibration));
  MESSAGE("attention, device-check profile: ", fitted.at("attention") * 1e3, " ms against ",
          traced.at("attention") * 1e3, " ms in the trace");
  CHECK(std::abs(error(fitted.at("attention"), traced.at("attention"))) < 0.30);
}

TEST_CASE("harness::Measured: peak memory of the real step against loom") {
  // torch.cuda.max_memory_allocated over the timed eager steps: 47.08 GB. loom: 43.30 GB
  // (-8 %) when this test was written; loom keeps BF16 weights beside FP32 master weights
  // where HF autocast keeps FP32 weights and casts them per use.
  const double measured = measured_run(4096, 2, "eager")["peak_allocated_bytes"];
  const double predicted = loom_json(step_args("none"))["results"]["memory"]["peak_bytes"];
  MESSAGE("peak memory: measured ", measured / 1e9, " GB, loom ", predicted / 1e9, " GB");
  CHECK(std::abs(error(predicted, measured)) < 0.15);
}
