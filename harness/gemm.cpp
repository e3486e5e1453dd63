// `loom-harness gemm`: cuBLASLt matmuls D = A^T B (column-major "TN", the layout FP8 needs
// and every dtype supports), FP32 accumulation, the heuristic's first algorithm, a 32 MiB
// workspace. FP8 is E4M3 inputs with per-tensor scales (A, B scale pointers) and BF16 output.
#include <cublasLt.h>

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

// Times one shape in one dtype; nullopt-like empty algorithm when cuBLASLt has no kernel.
GemmResult time_gemm(cublasLtHandle_t lt, const GemmShape& s, const std::string& dtype,
                     const Options& options, cudaStream_t stream) {
  const Types t = types_of(dtype);
  DeviceBuffer a(static_cast<size_t>(s.k * s.m) * t.in_bytes);
  DeviceBuffer b(static_cast<size_t>(s.k * s.n) * t.in_bytes);
  DeviceBuffer d(static_cast<size_t>(s.m * s.n) * t.out_bytes);
  DeviceBuffer workspace(WORKSPACE_BYTES);
  DeviceBuffer scales(2 * sizeof(float));
  fill_values(a.get(), s.k * s.m, t.fill, stream);
  fill_values(b.get(), s.k * s.n, t.fill, stream);
  const float ones[2] = {1.0f, 1.0f};
  check_cuda(cudaMemcpy(scales.get(), ones, sizeof ones, cudaMemcpyHostToDevice), "scales");

  cublasLtMatmulDesc_t desc = nullptr;
  check_lt(cublasLtMatmulDescCreate(&desc, t.compute, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const cublasOperation_t transpose = CUBLAS_OP_T;
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose);
  if (dtype == "fp8") {
    const float* a_scale = static_cast<const float*>(scales.get());
    const float* b_scale = a_scale + 1;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale,
                                   sizeof a_scale);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale,
                                   sizeof b_scale);
  }
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  check_lt(cublasLtMatrixLayoutCreate(&la, t.in, s.k, s.m, s.k), "layout A");
  check_lt(cublasLtMatrixLayoutCreate(&lb, t.in, s.k, s.n, s.k), "layout B");
  check_lt(cublasLtMatrixLayoutCreate(&ld, t.out, s.m, s.n, s.m), "layout D");
  cublasLtMatmulPreference_t pref = nullptr;
  check_lt(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                       &WORKSPACE_BYTES, sizeof WORKSPACE_BYTES);
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 1, &heuristic, &found);

  GemmResult r{dtype, s.m, s.n, s.k, {}, ""};
  if (found > 0) {
    const float alpha = 1.0f, beta = 0.0f;
    auto launch = [&] {
      check_lt(
          cublasLtMatmul(lt, desc, &alpha, a.get(), la, b.get(), lb, &beta, d.get(), ld, d.get(),
                         ld, &heuristic.algo, workspace.get(), WORKSPACE_BYTES, stream),
          "cublasLtMatmul");
    };
    r.time = summarize(time_runs(launch, stream, options));
    int id = 0;
    cublasLtMatmulAlgoConfigGetAttribute(&heuristic.algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id,
                                         nullptr);
    r.algorithm = fmt::format("cublasLt algo {}", id);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatmulDescDestroy(desc);
  return r;
}

}  // namespace

std::vector<GemmResult> measure_gemm(const std::vector<GemmShape>& shapes, const Options& options) {
  check_cuda(cudaSetDevice(0), "cudaSetDevice");
  cublasLtHandle_t lt = nullptr;
  check_lt(cublasLtCreate(&lt), "cublasLtCreate");
  cudaStream_t stream = nullptr;
  check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
  std::vector<GemmResult> results;
  for (const std::string& dtype : options.dtypes) {
    for (const GemmShape& s : shapes) {
      GemmResult r = time_gemm(lt, s, dtype, options, stream);
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
