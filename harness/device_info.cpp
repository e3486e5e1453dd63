// `loom-harness info`: the GPU and the software stack, from the CUDA runtime, cuBLASLt,
// NCCL, and NVML for the power limit. NVML ships with the driver, not the toolkit (no
// nvml.h here), so it is opened at run time; without it the power limit is 0 (unknown).
#include <cublasLt.h>
#include <dlfcn.h>
#include <nccl.h>

#include "harness/cuda_util.hpp"
#include "harness/measure.hpp"

namespace loom::harness {

namespace {

std::string cuda_version_text(int v) {
  return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
}

// NVML's library handle with nvmlInit_v2 done, or nullptr (no NVML on this machine).
// Signatures here and below from NVML's nvml.h (nvmlReturn_t is an int, 0 = success).
void* open_nvml() {
  void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (nvml == nullptr) return nullptr;
  using Init = int (*)();
  auto init = reinterpret_cast<Init>(dlsym(nvml, "nvmlInit_v2"));
  if (init == nullptr || init() != 0) {
    dlclose(nvml);
    return nullptr;
  }
  return nvml;
}

// The enforced power limit of the GPU at `pci_bus_id` through NVML, watts; 0 when NVML or the
// query is unavailable.
double power_limit_w(const char* pci_bus_id) {
  void* nvml = open_nvml();
  if (nvml == nullptr) return 0;
  using ByBus = int (*)(const char*, void**);
  using Limit = int (*)(void*, unsigned*);
  auto by_bus = reinterpret_cast<ByBus>(dlsym(nvml, "nvmlDeviceGetHandleByPciBusId_v2"));
  auto limit = reinterpret_cast<Limit>(dlsym(nvml, "nvmlDeviceGetEnforcedPowerLimit"));
  void* device = nullptr;
  unsigned milliwatts = 0;
  const bool ok =
      by_bus && limit && by_bus(pci_bus_id, &device) == 0 && limit(device, &milliwatts) == 0;
  dlclose(nvml);
  return ok ? milliwatts / 1000.0 : 0;
}

int attribute(cudaDeviceAttr what, int device) {
  int value = 0;
  check_cuda(cudaDeviceGetAttribute(&value, what, device), "cudaDeviceGetAttribute");
  return value;
}

}  // namespace

double current_sm_clock_mhz() {
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, 0) != cudaSuccess) return 0;
  void* nvml = open_nvml();
  if (nvml == nullptr) return 0;
  using ByBus = int (*)(const char*, void**);
  using ClockInfo = int (*)(void*, int, unsigned*);
  auto by_bus = reinterpret_cast<ByBus>(dlsym(nvml, "nvmlDeviceGetHandleByPciBusId_v2"));
  auto clock_info = reinterpret_cast<ClockInfo>(dlsym(nvml, "nvmlDeviceGetClockInfo"));
  void* device = nullptr;
  unsigned mhz = 0;
  constexpr int NVML_CLOCK_SM = 1;  // nvml.h nvmlClockType_t
  const bool ok = by_bus && clock_info && by_bus(bus, &device) == 0 &&
                  clock_info(device, NVML_CLOCK_SM, &mhz) == 0;
  dlclose(nvml);
  return ok ? mhz : 0;
}

std::vector<std::string> gpu_names() {
  int count = 0;
  check_cuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (count == 0) {
    throw DeviceError("no CUDA device: run loom-harness on a machine with an NVIDIA GPU");
  }
  std::vector<std::string> names;
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop{};
    check_cuda(cudaGetDeviceProperties(&prop, d), "cudaGetDeviceProperties");
    names.emplace_back(prop.name);
  }
  return names;
}

DeviceInfo query_device() {
  DeviceInfo info;
  const std::vector<std::string> names = gpu_names();
  info.device_count = static_cast<int>(names.size());
  info.name = names[0];
  info.compute_capability = attribute(cudaDevAttrComputeCapabilityMajor, 0) * 10 +
                            attribute(cudaDevAttrComputeCapabilityMinor, 0);
  info.sm_count = attribute(cudaDevAttrMultiProcessorCount, 0);
  info.sm_clock_mhz = attribute(cudaDevAttrClockRate, 0) / 1000.0;  // kHz
  info.memory_clock_mhz = attribute(cudaDevAttrMemoryClockRate, 0) / 1000.0;
  info.memory_bus_bits = attribute(cudaDevAttrGlobalMemoryBusWidth, 0);
  size_t free_bytes = 0, total_bytes = 0;
  check_cuda(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  info.memory_bytes = static_cast<std::int64_t>(total_bytes);
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, 0) == cudaSuccess)
    info.power_limit_w = power_limit_w(bus);
  int driver = 0, runtime = 0, nccl = 0;
  check_cuda(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  check_cuda(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
  info.driver_version = cuda_version_text(driver);
  info.runtime_version = cuda_version_text(runtime);
  const size_t cublas = cublasLtGetVersion();  // major*10000 + minor*100 + patch
  info.cublas_version = fmt::format("{}.{}.{}", cublas / 10000, cublas / 100 % 100, cublas % 100);
  if (ncclGetVersion(&nccl) == ncclSuccess) {  // major*10000 + minor*100 + patch (2.9+)
    info.nccl_version = fmt::format("{}.{}.{}", nccl / 10000, nccl / 100 % 100, nccl % 100);
  }
  return info;
}

}  // namespace loom::harness
