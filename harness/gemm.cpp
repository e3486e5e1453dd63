// `loom-harness gemm`: cuBLASLt matmuls D = A^T B (column-major "TN", the layout FP8 needs
// and every dtype supports), FP32 accumulation, the heuristic's first algorithm that runs, a 32 MiB
// workspace. FP8 is E4M3 inputs with per-tensor scales (A, B scale pointers) and BF16 output.
// Before the sweep the largest square GEMM of the first dtype runs until its rate is steady
// (the clocks have ramped and the power limit, if any, has taken hold); each sample is then
// one GEMM behind an L2 flush (cuda_util.hpp).
#include <cublasLt.h>

#include <chrono>
#include <cmath>

#include "harness/cuda_util.hpp"
#include "harness/kernels.hpp"
#include "harness/measure.hpp"

namespace loom::harness {

namespace {

constexpr size_t WORKSPACE_BYTES = size_t{32} << 20;

void check_lt(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  if (status == CUBLAS_STATUS_ALLOC_FAILED) {
    throw DeviceError(
        fmt::format("{}: too little GPU memory for cuBLASLt; use smaller shapes", what));
  }
  throw DeviceError(fmt::format("{}: {}", what, cublasLtGetStatusString(status)));
}

// Input type, output type, compute type and bytes per input / output element of a dtype.
struct Types {
  cudaDataType_t in, out;
  cublasComputeType_t compute;
  size_t in_bytes, out_bytes;
  FillType fill;
};

Types types_of(const std::string& dtype) {
  if (dtype == "bf16") return {CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 2, 2, FillType::BF16};
  if (dtype == "fp16") return {CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F, 2, 2, FillType::F16};
  if (dtype == "tf32") {
    return {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 4, 4, FillType::F32};
  }
  return {CUDA_R_8F_E4M3, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 1, 2, FillType::E4M3};
}

// FP8 matmul descriptions tried in turn (cuBLASLt 13.1 on an H200 refused every algorithm
// of the first, tests/validation/measured/h200-2026-11-28): per-tensor scale pointers; no
// scales (1); no scales with fast accumulation (Triton's cuBLAS FP8 path,
// third_party/nvidia/include/cublas_instance.h).
constexpr int FP8_VARIANTS = 3;
constexpr const char* FP8_VARIANT_NAMES[FP8_VARIANTS] = {"scaled", "unscaled",
                                                         "unscaled fast-accum"};

// The matmul description: TN, FP32 accumulation; for FP8 (`fp8_variant` >= 0) one of the
// FP8_VARIANTS, `scales` the device's A and B scale pair.
cublasLtMatmulDesc_t matmul_desc(const Types& t, int fp8_variant, const float* scales) {
  cublasLtMatmulDesc_t desc = nullptr;
  check_lt(cublasLtMatmulDescCreate(&desc, t.compute, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const cublasOperation_t transpose = CUBLAS_OP_T;
  check_lt(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose,
                                          sizeof transpose),
           "matmul TRANSA");
  if (fp8_variant == 0) {
    const float* a_scale = scales;
    const float* b_scale = scales + 1;
    check_lt(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale,
                                            sizeof a_scale),
             "matmul A scale");
    check_lt(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale,
                                            sizeof b_scale),
             "matmul B scale");
  }
  if (fp8_variant == 2) {
    const std::int8_t fast = 1;
    check_lt(
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast),
        "matmul fast accumulation");
  }
  return desc;
}

// Runs `launch` (one GEMM of `flops`) in windows of at least 200 ms until two windows in a
// row give rates within 1 % of each other, or `limit_s` has passed; what it reached.
template <typename Launch>
ClockState warm_clocks(Launch&& launch, double flops, cudaStream_t stream, double limit_s) {
  using Clock = std::chrono::steady_clock;
  const auto begin = Clock::now();
  ClockState state;
  double last_rate = 0;
  EventPair events;
  int per_window = 1;
  while (std::chrono::duration<double>(Clock::now() - begin).count() < limit_s) {
    check_cuda(cudaEventRecord(events.start, stream), "cudaEventRecord");
    for (int i = 0; i < per_window; ++i) launch();
    check_cuda(cudaEventRecord(events.stop, stream), "cudaEventRecord");
    const double seconds = events.seconds();
    if (seconds < 0.2) {  // too short a window to judge: lengthen it
      per_window *= 2;
      continue;
    }
    const double rate = flops * per_window / seconds;
    state.steady_tflops = rate / 1e12;
    if (last_rate > 0 && std::abs(rate - last_rate) <= 0.01 * last_rate) {
      state.steady = true;
      break;
    }
    last_rate = rate;
  }
  state.warmup_s = std::chrono::duration<double>(Clock::now() - begin).count();
  state.sm_clock_mhz = current_sm_clock_mhz();
  return state;
}

// Times one shape in one dtype (or, with `warmup`, runs it to warm the clocks and records
// that there); an empty algorithm when cuBLASLt has no kernel.
GemmResult time_gemm(cublasLtHandle_t lt, const GemmShape& s, const std::string& dtype,
                     const Options& options, cudaStream_t stream, L2Flush* flush,
                     ClockState* warmup) {
  const Types t = types_of(dtype);
  DeviceBuffer a(static_cast<size_t>(s.k * s.m) * t.in_bytes);
  DeviceBuffer b(static_cast<size_t>(s.k * s.n) * t.in_bytes);
  DeviceBuffer c(static_cast<size_t>(s.m * s.n) * t.out_bytes);  // C apart from D: FP8 wants it
  DeviceBuffer d(static_cast<size_t>(s.m * s.n) * t.out_bytes);
  check_cuda(cudaMemsetAsync(c.get(), 0, static_cast<size_t>(s.m * s.n) * t.out_bytes, stream),
             "cudaMemsetAsync");
  DeviceBuffer workspace(WORKSPACE_BYTES);
  DeviceBuffer scales(2 * sizeof(float));
  fill_values(a.get(), s.k * s.m, t.fill, stream);
  fill_values(b.get(), s.k * s.n, t.fill, stream);
  const float ones[2] = {1.0f, 1.0f};
  check_cuda(cudaMemcpy(scales.get(), ones, sizeof ones, cudaMemcpyHostToDevice), "scales");

  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  check_lt(cublasLtMatrixLayoutCreate(&la, t.in, s.k, s.m, s.k), "layout A");
  check_lt(cublasLtMatrixLayoutCreate(&lb, t.in, s.k, s.n, s.k), "layout B");
  check_lt(cublasLtMatrixLayoutCreate(&ld, t.out, s.m, s.n, s.m), "layout D");
  cublasLtMatmulPreference_t pref = nullptr;
  check_lt(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                &WORKSPACE_BYTES, sizeof WORKSPACE_BYTES),
           "workspace preference");
  constexpr int CANDIDATES = 8;
  cublasLtMatmulHeuristicResult_t candidates[CANDIDATES] = {};
  GemmResult r{dtype, s.m, s.n, s.k, {}, ""};
  const float alpha = 1.0f, beta = 0.0f;
  cublasLtMatmulDesc_t desc = nullptr;
  auto run = [&](const cublasLtMatmulAlgo_t& algo) {
    return cublasLtMatmul(lt, desc, &alpha, a.get(), la, b.get(), lb, &beta, c.get(), ld, d.get(),
                          ld, &algo, workspace.get(), WORKSPACE_BYTES, stream);
  };
  // The first description and the heuristic's first algorithm for it that run: an algorithm
  // it offers can still refuse the problem, and FP8 has more than one way to be asked for.
  int chosen = -1;
  const int variants = dtype == "fp8" ? FP8_VARIANTS : 1;
  int variant = 0;
  for (; variant < variants && chosen < 0; ++variant) {
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
    desc = matmul_desc(t, dtype == "fp8" ? variant : -1, static_cast<const float*>(scales.get()));
    int found = 0;
    // No kernel for this type on this GPU is an answer (found = 0), not an error to stop on.
    const cublasStatus_t searched = cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref,
                                                                   CANDIDATES, candidates, &found);
    if (searched != CUBLAS_STATUS_SUCCESS && searched != CUBLAS_STATUS_NOT_SUPPORTED)
      check_lt(searched, "cublasLtMatmulAlgoGetHeuristic");
    for (int i = 0; i < found && chosen < 0; ++i) {
      const cublasStatus_t status = run(candidates[i].algo);
      if (status == CUBLAS_STATUS_SUCCESS)
        chosen = i;
      else if (status != CUBLAS_STATUS_NOT_SUPPORTED)
        check_lt(status, "cublasLtMatmul");
    }
  }
  if (chosen >= 0) {
    const cublasLtMatmulHeuristicResult_t& heuristic = candidates[chosen];
    auto launch = [&] { check_lt(run(heuristic.algo), "cublasLtMatmul"); };
    if (warmup != nullptr) {
      *warmup = warm_clocks(launch, 2.0 * s.m * s.n * s.k, stream, options.clock_warmup_s);
    } else {
      r.time = summarize(time_cold(launch, stream, options, *flush));
    }
    int id = 0;
    check_lt(cublasLtMatmulAlgoConfigGetAttribute(&heuristic.algo, CUBLASLT_ALGO_CONFIG_ID, &id,
                                                  sizeof id, nullptr),
             "algorithm id");
    r.algorithm = fmt::format(
        "cublasLt algo {} (heuristic #{}{})", id, chosen + 1,
        dtype == "fp8" ? fmt::format(", {}", FP8_VARIANT_NAMES[variant - 1]) : std::string());
  }
  check_cuda(cudaStreamSynchronize(stream), "gemm");
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatmulDescDestroy(desc);
  return r;
}

}  // namespace

std::vector<GemmResult> measure_gemm(const std::vector<GemmShape>& shapes, const Options& options,
                                     ClockState& clock) {
  check_cuda(cudaSetDevice(0), "cudaSetDevice");
  cublasLtHandle_t lt = nullptr;
  check_lt(cublasLtCreate(&lt), "cublasLtCreate");
  cudaStream_t stream = nullptr;
  check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
  L2Flush flush;
  if (options.clock_warmup_s > 0 && !options.dtypes.empty()) {
    const GemmShape big{8192, 8192, 8192, "clock warm-up"};
    time_gemm(lt, big, options.dtypes.front(), options, stream, &flush, &clock);
    fmt::print("clocks: {:.1f} s of {} GEMMs, {} at {:.1f} TFLOP/s, SM clock {:.0f} MHz\n",
               clock.warmup_s, options.dtypes.front(), clock.steady ? "steady" : "NOT steady",
               clock.steady_tflops, clock.sm_clock_mhz);
  }
  clock.l2_flush_bytes = static_cast<std::int64_t>(flush.bytes());
  std::vector<GemmResult> results;
  for (const std::string& dtype : options.dtypes) {
    for (const GemmShape& s : shapes) {
      GemmResult r = time_gemm(lt, s, dtype, options, stream, &flush, nullptr);
      if (r.algorithm.empty()) {
        fmt::print(stderr, "gemm {} {}x{}x{}: cuBLASLt has no kernel on this GPU; skipped\n", dtype,
                   s.m, s.n, s.k);
        continue;
      }
      fmt::print("gemm {:4} m {:6} n {:6} k {:6}  {:10.2f} us  spread {:5.1f}%  {:8.1f} TFLOP/s\n",
                 dtype, s.m, s.n, s.k, r.time.median * 1e6, r.time.spread * 100,
                 flops_per_second(r) / 1e12);
      results.push_back(std::move(r));
    }
  }
  cudaStreamDestroy(stream);
  cublasLtDestroy(lt);
  return results;
}

}  // namespace loom::harness
