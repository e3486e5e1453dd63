// `loom-harness memory`: the bandwidth of memory-bound kernels, the kind of work loom's
// elementwise / normalisation model covers. Three FP32 grid-stride kernels over N elements:
// copy (reads N, writes N), elementwise d = a*x + b (reads 2N, writes N) and reduction
// (sum of N, reads N). Bytes reported are bytes read plus written. Also the cudaMemcpyAsync
// copies d2d (device to device), h2d and d2h (pinned host memory, over PCIe or C2C), whose
// bytes are the bytes copied, as CUDA's bandwidthTest counts them. Also fill_values, which
// gemm.cpp uses to give its inputs realistic bits.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <memory>

#include "harness/cuda_util.hpp"
#include "harness/kernels.hpp"
#include "harness/measure.hpp"

namespace loom::harness {

namespace {

constexpr int THREADS = 256;

__global__ void copy_kernel(const float* __restrict__ in, float* __restrict__ out, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    out[i] = in[i];
}

__global__ void axpb_kernel(const float* __restrict__ x, const float* __restrict__ b,
                            float* __restrict__ out, float a, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    out[i] = a * x[i] + b[i];
}

// Each block sums its grid-stride share in shared memory, then adds it to *out.
__global__ void sum_kernel(const float* __restrict__ in, float* out, size_t n) {
  __shared__ float partial[THREADS];
  float sum = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    sum += in[i];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = THREADS / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, partial[0]);
}

// A value in [-1, 1) from the element index (a 32-bit integer hash), so no two runs differ.
__device__ float hashed(size_t i) {
  unsigned x = static_cast<unsigned>(i) * 2654435761u;
  x ^= x >> 16;
  x *= 2246822519u;
  x ^= x >> 13;
  return static_cast<float>(x) / 2147483648.0f - 1.0f;
}

template <typename T>
__global__ void fill_kernel(T* data, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    data[i] = T(hashed(i));
}

int blocks_for(size_t n) {
  int sms = 0;
  check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "SM count");
  const size_t wanted = (n + THREADS - 1) / THREADS;
  return static_cast<int>(std::max<size_t>(1, std::min<size_t>(wanted, size_t(sms) * 16)));
}

// Bytes counted per element by each kernel: read + written, or copied for the memcpys.
int bytes_per_element(const std::string& kernel) {
  return kernel == "copy" ? 8 : kernel == "elementwise" ? 12 : 4;
}

bool is_memcpy(const std::string& kernel) {
  return kernel == "d2d" || kernel == "h2d" || kernel == "d2h";
}

// Page-locked host memory, so host copies run asynchronously at the link's rate.
class PinnedBuffer {
 public:
  /// Allocates `bytes` of pinned host memory; throws DeviceError when it cannot.
  explicit PinnedBuffer(size_t bytes) {
    check_cuda(cudaMallocHost(&ptr_, bytes), "cudaMallocHost (pinned host memory; lower -e)");
  }
  ~PinnedBuffer() { cudaFreeHost(ptr_); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
};

// The kind of cudaMemcpyAsync a memcpy kernel name stands for.
cudaMemcpyKind memcpy_kind(const std::string& kernel) {
  return kernel == "d2d"   ? cudaMemcpyDeviceToDevice
         : kernel == "h2d" ? cudaMemcpyHostToDevice
                           : cudaMemcpyDeviceToHost;
}

}  // namespace

void fill_values(void* data, std::int64_t count, FillType type, cudaStream_t stream) {
  const size_t n = static_cast<size_t>(count);
  const int blocks = blocks_for(n);
  switch (type) {
    case FillType::F32:
      fill_kernel<<<blocks, THREADS, 0, stream>>>(static_cast<float*>(data), n);
      break;
    case FillType::F16:
      fill_kernel<<<blocks, THREADS, 0, stream>>>(static_cast<__half*>(data), n);
      break;
    case FillType::BF16:
      fill_kernel<<<blocks, THREADS, 0, stream>>>(static_cast<__nv_bfloat16*>(data), n);
      break;
    case FillType::E4M3:
      fill_kernel<<<blocks, THREADS, 0, stream>>>(static_cast<__nv_fp8_e4m3*>(data), n);
      break;
  }
  check_cuda(cudaGetLastError(), "fill kernel");
}

std::vector<MemoryResult> measure_memory(const Options& options, ClockState& clock) {
  check_cuda(cudaSetDevice(0), "cudaSetDevice");
  size_t free_bytes = 0, total_bytes = 0;
  check_cuda(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  const size_t max_elements = static_cast<size_t>(options.max_bytes) / sizeof(float) + 1;
  L2Flush flush;
  clock.l2_flush_bytes = static_cast<std::int64_t>(flush.bytes());
  if (3 * max_elements * sizeof(float) > free_bytes - std::min(free_bytes, flush.bytes())) {
    throw DeviceError(fmt::format(
        "too little GPU memory: -e {} needs three {} B buffers and a {} B L2 flush buffer, {} B "
        "are free; lower -e",
        options.max_bytes, max_elements * sizeof(float), flush.bytes(), free_bytes));
  }
  DeviceBuffer x(max_elements * sizeof(float)), y(max_elements * sizeof(float));
  DeviceBuffer out(max_elements * sizeof(float));
  cudaStream_t stream = nullptr;
  check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
  fill_values(x.get(), static_cast<std::int64_t>(max_elements), FillType::F32, stream);
  fill_values(y.get(), static_cast<std::int64_t>(max_elements), FillType::F32, stream);
  const auto* xs = static_cast<const float*>(x.get());
  const auto* ys = static_cast<const float*>(y.get());
  auto* os = static_cast<float*>(out.get());
  const bool host_copies =
      std::any_of(options.kernels.begin(), options.kernels.end(),
                  [](const std::string& k) { return k == "h2d" || k == "d2h"; });
  std::unique_ptr<PinnedBuffer> host;
  if (host_copies) host = std::make_unique<PinnedBuffer>(max_elements * sizeof(float));
  std::vector<MemoryResult> results;
  for (const std::string& kernel : options.kernels) {
    for (std::int64_t bytes = options.min_bytes; bytes <= options.max_bytes; bytes *= 2) {
      const size_t n = std::max<size_t>(1, static_cast<size_t>(bytes) / sizeof(float));
      const int blocks = blocks_for(n);
      auto launch = [&] {
        if (is_memcpy(kernel)) {
          const cudaMemcpyKind kind = memcpy_kind(kernel);
          const void* from = kind == cudaMemcpyHostToDevice ? host->get() : xs;
          void* to = kind == cudaMemcpyDeviceToHost ? host->get() : static_cast<void*>(os);
          check_cuda(cudaMemcpyAsync(to, from, n * sizeof(float), kind, stream), "cudaMemcpyAsync");
        } else if (kernel == "copy")
          copy_kernel<<<blocks, THREADS, 0, stream>>>(xs, os, n);
        else if (kernel == "elementwise")
          axpb_kernel<<<blocks, THREADS, 0, stream>>>(xs, ys, os, 0.5f, n);
        else
          sum_kernel<<<blocks, THREADS, 0, stream>>>(xs, os, n);
      };
      MemoryResult r{kernel, static_cast<std::int64_t>(n) * bytes_per_element(kernel), {}};
      r.time = summarize(time_cold(launch, stream, options, flush));
      check_cuda(cudaGetLastError(), is_memcpy(kernel) ? "cudaMemcpyAsync" : "memory kernel");
      fmt::print("memory {:11} {:12} B  {:10.2f} us  spread {:5.1f}%  {:8.1f} GB/s\n", kernel,
                 r.bytes, r.time.median * 1e6, r.time.spread * 100, bytes_per_second(r) / 1e9);
      results.push_back(std::move(r));
    }
  }
  check_cuda(cudaStreamDestroy(stream), "cudaStreamDestroy");
  return results;
}

}  // namespace loom::harness
