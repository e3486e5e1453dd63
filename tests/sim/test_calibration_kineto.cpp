// The Kineto (PyTorch profiler) trace importer on test inputs written to the Kineto Chrome
// trace format (tests/sim/calibration_data/README.md): classification, steps, GEMM shapes,
// collective sizes, copies, gzip, malformed files. Expected figures are worked out by hand
// from the events of kineto_train_2steps.json (times in microseconds as the trace writes).
#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <string>

#include "common/error.hpp"
#include "common/limits.hpp"
#include "sim/calibration/gzip.hpp"
#include "sim/calibration/kineto.hpp"
#include "sim/calibration/nccl_tests.hpp"
#include "sim/calibration/profile.hpp"
#include "tests/source_path.hpp"
#include "tests/temp_dir.hpp"

using loom::testing::source_path;

using namespace loom;
using namespace loom::calibration;

namespace {

std::string data(const char* name) {
  return source_path("tests/sim/calibration_data/") + name;
}

const ClassTime* find_class(const TraceStep& step, const std::string& name) {
  for (const ClassTime& c : step.classes) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

// A minimal trace around `events` (a comma-separated list of event objects).
std::string trace(const std::string& events) {
  return R"({"schemaVersion": 1, "traceEvents": [)" + events + "]}";
}

std::string error_of(const std::string& text) {
  std::vector<std::string> notes;
  try {
    parse_kineto(text, "t.json", notes);
  } catch (const Error& e) {
    CHECK(e.exit_code() == ExitCode::BAD_INPUT);
    return e.what();
  }
  return "";
}

void check_two_steps(const TraceSummary& s) {
  CHECK(s.format == "kineto");
  CHECK(s.gpu == "NVIDIA H100 80GB HBM3");
  CHECK(s.rank == 0);
  CHECK(s.world_size == 8);
  REQUIRE(s.steps.size() == 2);
  CHECK(s.steps[0].name == "ProfilerStep#2");
  CHECK(s.steps[1].name == "ProfilerStep#3");
  // CPU annotations: dur 5000.000 and 4990.000.
  CHECK(s.steps[0].wall_seconds == doctest::Approx(5000e-6).scale(0));
  CHECK(s.steps[1].wall_seconds == doctest::Approx(4990e-6).scale(0));
  // Stream 7 runs 1100..2380 back to back, the all-reduce on stream 21 2380..2880, the
  // all-gather (1150..1600) lies inside: 1780 busy. Step 3: 6100..7396, 7396..7896: 1796.
  CHECK(s.steps[0].busy_seconds == doctest::Approx(1780e-6).scale(0));
  CHECK(s.steps[1].busy_seconds == doctest::Approx(1796e-6).scale(0));
  // Per step: addmm (sm90_xmma ... cublas) 640/650 + mm (nvjet) 220/222; flash 300/304;
  // layer norm 40; add 25 + gelu 35; all-gather 450; all-reduce 500; DtoD copy 20.
  const struct {
    const char* name;
    int kernels;
    double us[2];
  } expected[] = {{"gemm", 2, {860, 872}},
                  {"attention", 1, {300, 304}},
                  {"normalization", 1, {40, 40}},
                  {"elementwise", 2, {60, 60}},
                  {"nccl:all_reduce", 1, {500, 500}},
                  {"nccl:all_gather", 1, {450, 450}},
                  {"memcpy", 1, {20, 20}}};
  for (size_t i = 0; i < 2; ++i) {
    CAPTURE(i);
    CHECK(s.steps[i].classes.size() == std::size(expected));
    for (const auto& e : expected) {
      CAPTURE(e.name);
      const ClassTime* c = find_class(s.steps[i], e.name);
      REQUIRE(c != nullptr);
      CHECK(c->kernels == e.kernels);
      CHECK(c->seconds == doctest::Approx(e.us[i] * 1e-6).scale(0));
    }
  }
  // The HtoD copy of the input batch is launched at ts 485, before ProfilerStep#2 (1000).
  CHECK(s.activities_outside_steps == 1);
}

}  // namespace

TEST_CASE("calibration::Kineto: a two-step training trace by class, step and shape") {
  std::vector<std::string> notes;
  std::ifstream in(data("kineto_train_2steps.json"));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(looks_like_kineto(text));
  const TraceSummary s = parse_kineto(text, "trace.json", notes);
  check_two_steps(s);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].find("1 device activity launched outside") != std::string::npos);

  const auto means = s.per_step();
  REQUIRE(means.size() == 7);
  CHECK(means[0].name == "gemm");
  CHECK(means[0].seconds == doctest::Approx(866e-6).scale(0));  // (860 + 872) / 2
  CHECK(means[0].kernels == doctest::Approx(2));

  // Shapes from "Input Dims" of the op the kernel's External id names: addmm (bias, mat1
  // [4096, 4096], mat2 [4096, 12288]) and mm ([4096, 4096] x [4096, 4096]), BF16.
  REQUIRE(s.gemms.size() == 2);
  const GemmFigure& addmm = s.gemms[0];
  CHECK(addmm.op == "aten::addmm");
  CHECK(addmm.dtype == "bf16");
  CHECK((addmm.batch == 1 && addmm.m == 4096 && addmm.n == 12288 && addmm.k == 4096));
  CHECK(addmm.calls == 2);
  CHECK(addmm.seconds == doctest::Approx(1290e-6).scale(0));  // 640 + 650
  // 2 * 4096 * 12288 * 4096 = 412.3e9 FLOP per call, 645 us mean: 639.3 TFLOP/s.
  CHECK(addmm.flops_per_second() == doctest::Approx(2.0 * 4096 * 12288 * 4096 / 645e-6));
  const GemmFigure& mm = s.gemms[1];
  CHECK(mm.op == "aten::mm");
  CHECK((mm.m == 4096 && mm.n == 4096 && mm.k == 4096 && mm.calls == 2));
  CHECK(mm.seconds == doctest::Approx(442e-6).scale(0));  // 220 + 222

  // Sizes: all-gather from record_param_comms (an enclosing op of the launch): max(8388608,
  // 67108864) BFloat16 elements = 128 MiB; all-reduce from the kernel's own args: 16777216
  // Float = 64 MiB. busbw = bytes / time * (n-1)/n, * 2(n-1)/n for all-reduce (nccl-tests).
  REQUIRE(s.collectives.size() == 2);
  const CollectiveFigure& ag = s.collectives[0];
  CHECK(ag.op == sim::CollectiveOp::ALL_GATHER);
  CHECK(ag.group_size == 8);
  CHECK(ag.dtype == "bf16");
  CHECK(ag.bytes == 134217728);
  CHECK(ag.calls == 2);
  CHECK(ag.bus_bytes_per_second() == doctest::Approx(134217728 / 450e-6 * 7 / 8));
  const CollectiveFigure& ar = s.collectives[1];
  CHECK(ar.op == sim::CollectiveOp::ALL_REDUCE);
  CHECK(ar.dtype == "fp32");
  CHECK(ar.bytes == 67108864);
  CHECK(ar.bus_bytes_per_second() == doctest::Approx(67108864 / 500e-6 * 2 * 7 / 8));

  // Copies: two 32 MiB DtoD copies of 20 us each, one 1 MiB HtoD copy of 90 us.
  REQUIRE(s.copies.size() == 2);
  CHECK(s.copies[0].kind == "DtoD");
  CHECK(s.copies[0].calls == 2);
  CHECK(s.copies[0].bytes_per_second() == doctest::Approx(67108864 / 40e-6));
  CHECK(s.copies[1].kind == "HtoD");
  CHECK(s.copies[1].bytes == 1048576);
}

TEST_CASE("calibration::Kineto: import_files reads the gzipped trace as the plain one") {
  const ImportResult plain = import_files({data("kineto_train_2steps.json")});
  const ImportResult gz = import_files({data("kineto_train_2steps.json.gz")});
  REQUIRE(plain.traces.size() == 1);
  REQUIRE(gz.traces.size() == 1);
  CHECK(gz.tables.empty());
  check_two_steps(gz.traces[0]);
  CHECK(gz.traces[0].source == data("kineto_train_2steps.json.gz"));
  Profile a, b;
  a.traces = plain.traces;
  b.traces = gz.traces;
  b.traces[0].source = a.traces[0].source;
  CHECK(profile_to_json(a) == profile_to_json(b));
}

TEST_CASE("calibration::Kineto: trace summaries survive a profile round trip") {
  const loom::testing::TempDir dir("kineto");
  Profile profile;
  profile.traces = import_files({data("kineto_train_2steps.json")}).traces;
  write_profile(profile, dir.file("p.json"));
  const Profile back = read_profile(dir.file("p.json"));
  REQUIRE(back.traces.size() == 1);
  check_two_steps(back.traces[0]);
  CHECK(profile_to_json(back) == profile_to_json(profile));
}

TEST_CASE("calibration::Kineto: malformed traces name the file and the place") {
  // Cut off inside the all-reduce kernel event of step 2: line 1621, column 13.
  std::string message;
  try {
    import_files({data("kineto_truncated.json")});
  } catch (const CalibrationError& e) {
    message = e.what();
  }
  CHECK(message.find(data("kineto_truncated.json") + ":1621:13: malformed JSON at byte ") == 0);

  CHECK(error_of(R"({"traceEvents": [{"ph": "X", "cat": "kernel")").find("t.json:1:") == 0);
  CHECK(error_of(trace(R"({"ph": "X", "cat": "kernel", "name": "k", "ts": "1", "dur": 2})"))
            .find("/traceEvents/0/ts") != std::string::npos);
  CHECK(error_of(trace(R"({"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": -2})"))
            .find("/traceEvents/0/dur") != std::string::npos);
  CHECK(error_of(trace(R"({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2})"))
            .find("no GPU kernels") != std::string::npos);
  CHECK(error_of(R"({"traceEvents": 3})").find("/traceEvents") != std::string::npos);
  // "ph" or "cat" of another type: not a kernel (json::value() used to throw type_error 302).
  CHECK(error_of(trace(R"({"ph": 5, "cat": "kernel", "name": "k", "ts": 1, "dur": 2})"))
            .find("no GPU kernels") != std::string::npos);
  CHECK(error_of(trace(R"({"ph": "X", "cat": 5, "name": "k", "ts": 1, "dur": 2})"))
            .find("no GPU kernels") != std::string::npos);
  // A number beyond a double and nesting beyond MAX_JSON_DEPTH are bad input too.
  CHECK(error_of(trace(R"({"ph": "X", "cat": "kernel", "name": "k", "ts": 1e400, "dur": 2})"))
            .find("1e400") != std::string::npos);
  CHECK(error_of(trace(std::string(200, '[') + std::string(200, ']'))).find("MAX_JSON_DEPTH") !=
        std::string::npos);

  // A gzip file cut short names the compressed byte where it ends.
  std::ifstream in(data("kineto_train_2steps.json.gz"), std::ios::binary);
  const std::string gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(is_gzip(gz));
  message.clear();
  try {
    gunzip(gz.substr(0, 1000), "cut.json.gz", loom::MAX_MEASUREMENT_FILE_BYTES);
  } catch (const CalibrationError& e) {
    message = e.what();
  }
  CHECK(message ==
        "cut.json.gz: corrupt or truncated gzip data at compressed byte 1000 "
        "(unexpected end of data); check the copy, or import the uncompressed .json");
}

TEST_CASE("calibration::Kineto: kernel names by class") {
  CHECK(classify_activity("kernel",
                          "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn") == "gemm");
  CHECK(
      classify_activity(
          "kernel", "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>") ==
      "gemm");
  CHECK(classify_activity("kernel", "void cublasLt::splitKreduce_kernel<32, 16, int, float>") ==
        "gemm");
  CHECK(classify_activity(
            "kernel",
            "fmha_cutlassF_bf16_aligned_64x128_rf_sm80(PyTorchMemEffAttention::AttentionKernel)") ==
        "attention");
  CHECK(classify_activity("kernel",
                          "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_"
                          "64x128x128_4x1x1_kernel0_0") == "attention");
  CHECK(
      classify_activity(
          "kernel",
          "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float>") ==
      "normalization");
  CHECK(classify_activity("kernel", "triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0") ==
        "elementwise");
  CHECK(classify_activity("kernel",
                          "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>") ==
        "elementwise");
  CHECK(classify_activity("kernel", "void at::native::indexSelectLargeIndex<float, long>") ==
        "other");
  CHECK(classify_activity("kernel", "ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWorkElem)") ==
        "nccl:all_gather");
  CHECK(classify_activity(
            "kernel",
            "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)") ==
        "nccl:reduce_scatter");
  CHECK(classify_activity("kernel", "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)") ==
        "nccl:send_recv");
  // A generic NCCL kernel says its collective only in the arguments.
  CHECK(classify_activity("kernel", "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)") ==
        "nccl:unknown");
  CHECK(classify_activity("kernel", "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)",
                          "all_to_all") == "nccl:all_to_all");
  CHECK(classify_activity("gpu_memset", "Memset (Device)") == "memset");
  CHECK(collective_of("_reduce_scatter_base") == sim::CollectiveOp::REDUCE_SCATTER);
  CHECK(collective_of("allreduce_coalesced") == sim::CollectiveOp::ALL_REDUCE);
  CHECK_FALSE(collective_of("Generic_4").has_value());
}

TEST_CASE("calibration::Kineto: kernels without shapes, sizes or steps are counted and noted") {
  // One GEMM kernel whose op has no Input Dims (record_shapes off), one NCCL kernel without
  // metadata, no ProfilerStep annotation; linked through the launch's correlation only.
  const std::string text = trace(R"(
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 20,
     "args": {"External id": 7}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
     "ts": 15, "dur": 5, "args": {"External id": 7, "correlation": 70}},
    {"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n", "pid": 0,
     "tid": 7, "ts": 40, "dur": 100, "args": {"device": 0, "stream": 7, "correlation": 70}},
    {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "pid": 0,
     "tid": 9, "ts": 50, "dur": 30, "args": {"device": 0, "stream": 9, "correlation": 71}})");
  std::vector<std::string> notes;
  const TraceSummary s = parse_kineto(text, "t.json", notes);
  CHECK(s.steps.empty());
  CHECK(s.activities_outside_steps == 2);
  CHECK(s.gemms.empty());
  CHECK(s.collectives.empty());
  CHECK(s.gpu.empty());
  CHECK(s.rank == -1);
  REQUIRE(notes.size() == 3);
  CHECK(notes[0].find("no ProfilerStep#N annotations") != std::string::npos);
  CHECK(notes[1].find("1 of 1 GEMM kernels have no shape") != std::string::npos);
  CHECK(notes[2].find("1 of 1 NCCL kernels have no message size") != std::string::npos);
}

TEST_CASE("calibration::Kineto: a GEMM shape from the aten::linear around the launch") {
  // The launch's own op (External id 8) has no shape; the enclosing aten::linear has one:
  // input [2, 1024, 512] (2048 rows), weight [256, 512]: m 2048, n 256, k 512, FP16.
  const std::string text = trace(R"(
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0", "pid": 1, "tid": 1,
     "ts": 0, "dur": 100},
    {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 10,
     "dur": 30, "args": {"External id": 7, "Input Dims": [[2, 1024, 512], [256, 512], []],
     "Input type": ["c10::Half", "c10::Half", ""]}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::_unsafe_mm", "pid": 1, "tid": 1, "ts": 12,
     "dur": 20, "args": {"External id": 8}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
     "ts": 15, "dur": 5, "args": {"External id": 8, "correlation": 80}},
    {"ph": "X", "cat": "kernel", "name": "void cutlass::Kernel2<cutlass_80_wmma_tensorop_h161616gemm>",
     "pid": 0, "tid": 7, "ts": 200, "dur": 4, "args": {"External id": 8, "device": 0,
     "stream": 7, "correlation": 80}})");
  std::vector<std::string> notes;
  const TraceSummary s = parse_kineto(text, "t.json", notes);
  CHECK(notes.empty());
  REQUIRE(s.steps.size() == 1);  // the kernel runs after the step's CPU span, launched inside
  CHECK(s.activities_outside_steps == 0);
  REQUIRE(s.gemms.size() == 1);
  CHECK(s.gemms[0].op == "aten::linear");
  CHECK(s.gemms[0].dtype == "fp16");
  CHECK((s.gemms[0].m == 2048 && s.gemms[0].n == 256 && s.gemms[0].k == 512));
}
