#include "topologies/gpu_catalog.hpp"
#include "topologies/host_speed.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <utility>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "common/strings.hpp"
#include "topologies/gpu_json.hpp"
#include "topologies/kernel_model.hpp"

namespace loom::topo {
namespace {

constexpr double T = 1e12;  // TFLOP/s
constexpr double G = 1e9;   // GB, GB/s (datasheet units are SI)

// Citations, one per datasheet. Peak rates are dense (datasheets print 2:4-sparse rates, 2x,
// with an asterisk); NVLink figures are per GPU per direction = the datasheet's
// bidirectional figure / 2.
constexpr const char* SRC_A100 =
    "NVIDIA A100 Tensor Core GPU datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf)";
constexpr const char* SRC_H100 =
    "NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100)";
constexpr const char* SRC_H200 =
    "NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200)";
constexpr const char* SRC_B200 =
    "NVIDIA Blackwell datasheet / DGX B200 product page (HGX B200 column, 1000 W)";
constexpr const char* SRC_GB200 =
    "NVIDIA Blackwell datasheet / GB200 NVL72 product page (B200 in GB200, 1200 W)";
constexpr const char* SRC_B300 =
    "NVIDIA DGX B300 / HGX B300 datasheet (B300, 1100 W), per-GPU dense figures as tabulated in "
    "Verda, 'NVIDIA GB300 NVL72: GPU Architecture & Performance' (verda.com/blog/"
    "gb300-nvl72-architecture); HGX B300 dense BF16 2250 / FP8 4500 TF also in G. Lockwood, "
    "glennklockwood.com/garden/processors/B300";
constexpr const char* SRC_GB300 =
    "NVIDIA GB300 NVL72 product page: 180 PF dense BF16, 360 PF dense FP8, 20 TB HBM3e at "
    "576 TB/s per 72 GPUs (B300 in GB300, 1400 W; per-GPU table in Verda, verda.com/blog/"
    "gb300-nvl72-architecture)";
constexpr const char* SRC_L40S =
    "NVIDIA L40S datasheet (resources.nvidia.com/en-us-l40s/l40s-datasheet-28413)";
constexpr const char* SRC_4090 =
    "NVIDIA Ada Lovelace GPU Architecture whitepaper, Appendix table: GeForce RTX 4090";
constexpr const char* SRC_MI300X = "AMD Instinct MI300X data sheet (amd.com)";

// Citations for SM counts and architectures, one per GPU die configuration.
constexpr const char* ARCH_A100 =
    "NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020): Ampere GA100, 108 SMs";
constexpr const char* ARCH_H100_SXM =
    "NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022): Hopper GH100, H100 SXM5 132 SMs";
constexpr const char* ARCH_H100_PCIE =
    "NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022): Hopper GH100, H100 PCIe 114 SMs";
constexpr const char* ARCH_H100_NVL =
    "Hopper GH100 in the SXM5 configuration, 132 SMs (H100 NVL: 16,896 CUDA cores = 132 x 128)";
constexpr const char* ARCH_H200 =
    "NVIDIA H200 datasheet: the GH100 of H100 SXM5 (132 SMs, H100 whitepaper) with HBM3e";
constexpr const char* ARCH_B200 =
    "Blackwell B200: 148 SMs per GPU (CUDA multiProcessorCount; not on the datasheet)";
constexpr const char* ARCH_B300 =
    "Blackwell Ultra B300: 160 SMs (20,480 CUDA cores = 160 x 128; NVIDIA Technical Blog, "
    "'Inside NVIDIA Blackwell Ultra', 2025)";
constexpr const char* ARCH_L40S =
    "NVIDIA L40S datasheet: Ada AD102, 18,176 CUDA cores = 142 SMs x 128";
constexpr const char* ARCH_4090 =
    "NVIDIA Ada Lovelace GPU Architecture whitepaper, Appendix: RTX 4090 AD102, 128 SMs";
constexpr const char* ARCH_MI300X =
    "AMD CDNA 3 Architecture whitepaper / MI300X data sheet: 304 compute units";

GpuSpec spec(const char* name, const char* display, const char* vendor, double fp32, double tf32,
             double bf16, double fp16, double fp8, double hbm_gb, double hbm_bw_gbps,
             double nvlink_bidir_gbps, int nvlink_gen, int pcie_gen, double tdp, const char* src) {
  GpuSpec s;
  s.name = name;
  s.display_name = display;
  s.vendor = vendor;
  s.fp32_flops = fp32 * T;
  s.tf32_flops = tf32 * T;
  s.bf16_flops = bf16 * T;
  s.fp16_flops = fp16 * T;
  s.fp8_flops = fp8 * T;
  s.hbm_bytes = hbm_gb * G;
  s.hbm_datasheet_bytes = hbm_gb * G;
  s.hbm_bandwidth_Bps = hbm_bw_gbps * G;
  s.nvlink_bandwidth_Bps = nvlink_bidir_gbps / 2 * G;
  s.nvlink_generation = nvlink_gen;
  s.pcie_generation = pcie_gen;
  s.tdp_watts = tdp;
  s.source = src;
  return s;
}

// Adds the whitepaper facts (SM count, architecture) to a datasheet entry.
GpuSpec with_arch(GpuSpec s, int sm_count, GpuArch arch, const char* src) {
  s.sm_count = sm_count;
  s.arch = arch;
  s.arch_source = src;
  return s;
}

// Adds the dense FP4 (NVFP4) tensor-core peak, in TFLOP/s, of a GPU that has one.
GpuSpec with_fp4(GpuSpec s, double fp4_tflops) {
  s.fp4_flops = fp4_tflops * T;
  return s;
}

// Sets the measured large-GEMM fractions of a GPU whose own measurement differs from its
// architecture's (topologies/kernel_coefficients.cpp, architecture_gemm_fraction).
GpuSpec with_gemm_fractions(GpuSpec s, double bf16, double fp8) {
  s.gemm_fraction_tf32 = bf16;
  s.gemm_fraction_bf16 = bf16;
  s.gemm_fraction_fp16 = bf16;
  s.gemm_fraction_fp8 = fp8;
  return s;
}

// Sustained-to-burst matmul throughput at the board's power limit: S. Bekman's MSMF (the
// rate a matmul holds over a 2 s window once the GPU sits at its power limit) over MAMF (the
// boost-clock burst) of the same mamf-finder run ("Machine Learning Engineering",
// compute/accelerator/README.md @fe12f4e4, "Maximum Achievable and Sustainable Matmul FLOPS
// comparison table"; its notes give the clocks: B200 1965 MHz burst, 1399-1447 MHz
// sustained at 975-987 W; H200 1980 MHz burst, 1767-1918 MHz at 683-689 W), the mean of the
// BF16 and FP8 rows:
//   H200 SXM (700 W): 755 / 850 and 1354 / 1525 -> 0.888; the H100 SXM takes it (the same
//     GH100 die and 700 W board limit; no H100 MSMF is published);
//   HGX B200 (1000 W): 1439 / 1737 and 2788 / 3350 -> 0.830 (flashinfer PR #2899 saw the
//     same throttling on attention kernels: 1450 -> 1237 TFLOP/s, 0.853);
//   HGX B300 (1100 W): 1519 / 1892 and 2969 / 3608 -> 0.813 (an earlier benchmark version,
//     "compare only roughly");
//   MI300X (750 W): 616 / 634 and 1182 / 1230 -> 0.966 (it reaches its cap within the
//     first kernel, so its burst is barely above its sustained rate).
// GPUs without a figure keep the A100-derived default (gpu_catalog.hpp).
GpuSpec with_load_clock(GpuSpec s, double fraction) {
  s.load_clock_fraction = fraction;
  return s;
}
// The host CPU time of one eager op, measured by TE issue #2053 (M. Sievers, "High CPU
// overhead on Grace systems", Aug 2025): a torch.nn.Linear forward (one cuBLAS GEMM; hidden
// 2048, 8192 tokens, bf16) costs the host 13.48 us on a DGX H100 (Intel Xeon Platinum 8480C),
// 37.08 us on a GB200 and 33.17 us on a GH200 (Grace). The x86 figure is taken for the HGX /
// DGX boards of Hopper and Blackwell (their Xeon hosts; no B200 / B300 host was measured), the
// GB200 figure for the Grace-hosted GB200 and GB300.
GpuSpec with_host(GpuSpec s, double op_s) {
  s.host_op_s = op_s;
  return s;
}

constexpr double H200_SUSTAINED = (755.0 / 850 + 1354.0 / 1525) / 2;
constexpr double B200_SUSTAINED = (1439.0 / 1737 + 2788.0 / 3350) / 2;
constexpr double B300_SUSTAINED = (1519.0 / 1892 + 2969.0 / 3608) / 2;
constexpr double MI300X_SUSTAINED = (616.0 / 634 + 1182.0 / 1230) / 2;

// A board of the same die at a higher power limit and no sustained measurement of its own
// (GB200 at 1200 W, GB300 at 1400 W): the measured board's sustained BF16 and FP8 rates (MSMF
// above: HGX B200 at 1000 W, HGX B300 at 1100 W) raised by the cube-root DVFS law loom applies
// to power limits (dvfs_clock_ratio, as sustained_clock_fraction: clock ∝ P^(1/3)), over the
// board's own burst rates, mean of the two dtypes, at most 1 (no clock past boost). The GB200's
// bursts are its MAMF (1822 / 3615.6 TFLOP/s, below); the GB300 has none and takes Blackwell's
// large-GEMM fractions of its datasheet peaks, as its GEMMs do.
double sustained_at_higher_limit(double bf16_tflops, double fp8_tflops, double watts,
                                 double board_watts, double burst_bf16, double burst_fp8) {
  const double raise = dvfs_clock_ratio(board_watts, watts);
  return std::min(1.0, (bf16_tflops * raise / burst_bf16 + fp8_tflops * raise / burst_fp8) / 2);
}

// Blackwell Ultra's fused attention: B300 doubles the exponent (MUFU.EX2) throughput of
// B200's SMs (NVIDIA Technical Blog, "Inside NVIDIA Blackwell Ultra", 2025: "2X attention-
// layer acceleration"), which bounds the forward, not the shared-memory-bound backward
// (FlashAttention-4, arXiv:2603.05451). In one run of NVIDIA's cuDNN benchmark (cuDNN 9.22,
// BF16, causal, head dim 128, 4096 tokens, batch 2, 64 / 8 heads) GB300 reached 1703 TFLOP/s
// forward and 1248 backward where GB200 reached 1408 and 1148 (cudnn-frontend benchmark/
// sdpa_benchmark_training/results/llama3.1/{gb300,gb200}/llama3.1_20260424_*.csv): x1.21
// forward, x1.09 backward, applied to Blackwell's own figures (kernel_coefficients.cpp,
// architecture_attention_fraction: cuDNN 9.18 on GB200, the backward at 0.8 of it).
GpuSpec with_blackwell_ultra_attention(GpuSpec s) {
  const double blackwell = architecture_attention_fraction(GpuArch::BLACKWELL);
  s.attention_fraction = blackwell * (1703.0 / 1408.0);
  s.attention_backward_fraction =
      blackwell * GpuEfficiency{}.attention_backward_ratio * (1248.0 / 1148.0);
  return s;
}

std::vector<GpuSpec> build_catalog() {
  // Columns: fp32, tf32, bf16, fp16, fp8 (dense TFLOP/s); HBM GB, HBM GB/s; NVLink GB/s
  // bidirectional per GPU (halved into per direction); NVLink gen; PCIe gen; TDP W; then
  // with_arch: SMs (AMD: CUs), architecture, whitepaper. Capacity: gpu_capacity.cpp.
  return with_runtime_capacity(std::vector<GpuSpec>{
      // A100 datasheet, SXM4 40GB: 19.5 / 156 / 312 / 312 TF, 40 GB HBM2 at 1,555 GB/s,
      // NVLink 600 GB/s, PCIe Gen4, 400 W.
      with_arch(spec("a100-sxm-40gb", "A100 SXM4 40GB", "nvidia", 19.5, 156, 312, 312, 0, 40, 1555,
                     600, 3, 4, 400, SRC_A100),
                108, GpuArch::AMPERE, ARCH_A100),
      // A100 datasheet, SXM4 80GB: 80 GB HBM2e at 2,039 GB/s, otherwise as above.
      with_arch(spec("a100-sxm-80gb", "A100 SXM4 80GB", "nvidia", 19.5, 156, 312, 312, 0, 80, 2039,
                     600, 3, 4, 400, SRC_A100),
                108, GpuArch::AMPERE, ARCH_A100),
      // A100 datasheet, PCIe 40GB: 1,555 GB/s, NVLink bridge for 2 GPUs 600 GB/s, 250 W.
      with_arch(spec("a100-pcie-40gb", "A100 PCIe 40GB", "nvidia", 19.5, 156, 312, 312, 0, 40, 1555,
                     600, 3, 4, 250, SRC_A100),
                108, GpuArch::AMPERE, ARCH_A100),
      // A100 datasheet, PCIe 80GB: 1,935 GB/s, NVLink bridge 600 GB/s, 300 W.
      with_arch(spec("a100-pcie-80gb", "A100 PCIe 80GB", "nvidia", 19.5, 156, 312, 312, 0, 80, 1935,
                     600, 3, 4, 300, SRC_A100),
                108, GpuArch::AMPERE, ARCH_A100),
      // H100 datasheet, SXM5: 67 / 494.7 / 989.4 / 989.4 / 1978.9 TF dense, 80 GB HBM3 at
      // 3.35 TB/s, NVLink 900 GB/s, PCIe Gen5, up to 700 W.
      with_host(
          with_load_clock(with_arch(spec("h100-sxm", "H100 SXM5 80GB", "nvidia", 67, 494.7, 989.4,
                                         989.4, 1978.9, 80, 3350, 900, 4, 5, 700, SRC_H100),
                                    132, GpuArch::HOPPER, ARCH_H100_SXM),
                          H200_SUSTAINED),
          XEON_HOST_OP_S),
      // H100 datasheet (2022 PCIe column): 51 / 378 / 756 / 756 / 1513 TF, 80 GB HBM2e at
      // 2.0 TB/s, NVLink bridge 600 GB/s, 300-350 W (upper bound kept).
      with_arch(spec("h100-pcie", "H100 PCIe 80GB", "nvidia", 51, 378, 756, 756, 1513, 80, 2000,
                     600, 4, 5, 350, SRC_H100),
                114, GpuArch::HOPPER, ARCH_H100_PCIE),
      // H100 datasheet, NVL column: 60 / 417.5 / 835 / 835 / 1670.5 TF, 94 GB HBM3 at
      // 3.9 TB/s, NVLink bridge 600 GB/s, 350-400 W (upper bound kept).
      with_arch(spec("h100-nvl", "H100 NVL 94GB", "nvidia", 60, 417.5, 835, 835, 1670.5, 94, 3900,
                     600, 4, 5, 400, SRC_H100),
                132, GpuArch::HOPPER, ARCH_H100_NVL),
      // H200 datasheet, SXM: H100 SXM compute, 141 GB HBM3e at 4.8 TB/s, NVLink 900 GB/s, 700 W.
      with_host(with_load_clock(with_arch(spec("h200", "H200 SXM 141GB", "nvidia", 67, 494.7, 989.4,
                                               989.4, 1978.9, 141, 4800, 900, 4, 5, 700, SRC_H200),
                                          132, GpuArch::HOPPER, ARCH_H200),
                                H200_SUSTAINED),
                XEON_HOST_OP_S),
      // H200 datasheet, NVL column: 60 / 417.5 / 835 / 835 / 1670.5 TF, 141 GB at 4.8 TB/s,
      // NVLink bridge 900 GB/s, up to 600 W.
      with_arch(spec("h200-nvl", "H200 NVL 141GB", "nvidia", 60, 417.5, 835, 835, 1670.5, 141, 4800,
                     900, 4, 5, 600, SRC_H200),
                132, GpuArch::HOPPER, ARCH_H200),
      // HGX B200 (1000 W): 80 / 1100 / 2250 / 2250 / 4500 TF dense, 180 GB usable HBM3e
      // (DGX B200: 1,440 GB / 8) at 8 TB/s, NVLink5 1.8 TB/s, PCIe Gen5; dense FP4 9,000 TF.
      with_host(with_load_clock(
                    with_fp4(with_arch(spec("b200", "B200 (HGX, 1000W)", "nvidia", 80, 1100, 2250,
                                            2250, 4500, 180, 8000, 1800, 5, 5, 1000, SRC_B200),
                                       148, GpuArch::BLACKWELL, ARCH_B200),
                             9000),
                    B200_SUSTAINED),
                XEON_HOST_OP_S),
      // B200 in GB200 NVL72 (1200 W): 90 / 1250 / 2500 / 2500 / 5000 TF, 186 GB (13.4 TB / 72)
      // at 8 TB/s, NVLink5 1.8 TB/s. The GPU talks to Grace over NVLink-C2C; its NICs sit on
      // PCIe Gen5, which is what pcie_generation records.
      // Its own MAMF (S. Bekman, ml-engineering compute/accelerator/README.md): bf16
      // 1822 / 2500 = 72.9%, fp8 3615.6 / 5000 = 72.3% of the 1200 W datasheet peaks.
      // Dense FP4 10,000 TF (reference gpus.json, the GB200 NVL72 product page).
      with_host(with_load_clock(with_fp4(with_gemm_fractions(
                                             with_arch(spec("gb200", "B200 in GB200 NVL72",
                                                            "nvidia", 90, 1250, 2500, 2500, 5000,
                                                            186, 8000, 1800, 5, 5, 1200, SRC_GB200),
                                                       148, GpuArch::BLACKWELL, ARCH_B200),
                                             0.729, 0.723),
                                         10000),
                                sustained_at_higher_limit(1439, 2788, 1000, 1200, 1822, 3615.6)),
                GRACE_HOST_OP_S),
      // HGX B300 (1100 W): 75 / 1100 / 2250 / 2250 / 4500 TF dense (the B200's rates; Blackwell
      // Ultra adds dense FP4 — 14,000 TF, Verda's per-GPU table — and exponent throughput,
      // its attention fractions: with_blackwell_ultra_attention), 270 GB usable HBM3e at
      // 7.7 TB/s, NVLink5 1.8 TB/s; ConnectX-8 NICs on PCIe Gen6.
      with_host(
          with_load_clock(with_blackwell_ultra_attention(with_fp4(
                              with_arch(spec("b300", "B300 (HGX, 1100W)", "nvidia", 75, 1100, 2250,
                                             2250, 4500, 270, 7700, 1800, 5, 6, 1100, SRC_B300),
                                        160, GpuArch::BLACKWELL, ARCH_B300),
                              14000)),
                          B300_SUSTAINED),
          XEON_HOST_OP_S),
      // B300 in GB300 NVL72 (1400 W): 80 / 1250 / 2500 / 2500 / 5000 TF dense (rack 180 PF
      // BF16, 360 PF FP8 / 72), 279 GB (20 TB / 72) at 8 TB/s (576 TB/s / 72), NVLink5
      // 1.8 TB/s; its ConnectX-8 NICs sit on PCIe Gen6. Dense FP4 15,000 TF (rack 1,080 PF
      // dense FP4 / 72; Verda's per-GPU table).
      with_host(with_load_clock(
                    with_blackwell_ultra_attention(with_fp4(
                        with_arch(spec("gb300", "B300 in GB300 NVL72", "nvidia", 80, 1250, 2500,
                                       2500, 5000, 279, 8000, 1800, 5, 6, 1400, SRC_GB300),
                                  160, GpuArch::BLACKWELL, ARCH_B300),
                        15000)),
                    sustained_at_higher_limit(
                        1519, 2969, 1100, 1400,
                        2500 * architecture_gemm_fraction(GpuArch::BLACKWELL, DType::BF16),
                        5000 * architecture_gemm_fraction(GpuArch::BLACKWELL, DType::FP8))),
                GRACE_HOST_OP_S),
      // L40S datasheet: 91.6 / 183 / 362.05 / 362.05 / 733 TF, 48 GB GDDR6 at 864 GB/s,
      // no NVLink, PCIe Gen4 x16, 350 W.
      with_arch(spec("l40s", "L40S 48GB", "nvidia", 91.6, 183, 362.05, 362.05, 733, 48, 864, 0, 0,
                     4, 350, SRC_L40S),
                142, GpuArch::ADA, ARCH_L40S),
      // Ada whitepaper, RTX 4090 (fp32 accumulate): 82.6 / 82.6 / 165.2 / 165.2 / 330.3 TF,
      // 24 GB GDDR6X at 1,008 GB/s, no NVLink, PCIe Gen4, 450 W.
      with_arch(spec("rtx4090", "GeForce RTX 4090", "nvidia", 82.6, 82.6, 165.2, 165.2, 330.3, 24,
                     1008, 0, 0, 4, 450, SRC_4090),
                128, GpuArch::ADA, ARCH_4090),
      // MI300X data sheet: 163.4 / 653.7 / 1307.4 / 1307.4 / 2614.9 TF dense, 192 GB HBM3 at
      // 5.3 TB/s, 750 W, PCIe Gen5. Its GPU-to-GPU fabric is Infinity Fabric (7 links x
      // 128 GB/s bidirectional = 896 GB/s), stored in the nvlink field; generation 0 (not NVLink).
      with_load_clock(with_arch(spec("mi300x", "AMD Instinct MI300X", "amd", 163.4, 653.7, 1307.4,
                                     1307.4, 2614.9, 192, 5300, 896, 0, 5, 750, SRC_MI300X),
                                304, GpuArch::CDNA3, ARCH_MI300X),
                      MI300X_SUSTAINED),
  });
}

}  // namespace

const std::vector<std::string>& gpu_arch_names() {
  static const std::vector<std::string> names = {"volta",  "ampere",    "ada",
                                                 "hopper", "blackwell", "cdna3"};
  return names;
}

std::string to_string(GpuArch arch) {
  return gpu_arch_names()[static_cast<std::size_t>(arch)];
}

const std::vector<GpuSpec>& gpu_catalog() {
  static const std::vector<GpuSpec> catalog = build_catalog();
  return catalog;
}

namespace {

// The measured-efficiency overrides: fractions of the dense peak in [0, 1], 0 for the
// architecture's default.
void read_efficiencies(ObjectReader& r, GpuSpec& s) {
  // A new forward attention figure without a backward one drops the base GPU's backward
  // figure, which belonged with the base's forward: the backward is then derived from it.
  if (r.has("attention_efficiency") && !r.has("attention_backward_efficiency"))
    s.attention_backward_fraction = 0;
  const std::pair<const char*, double*> keys[] = {
      {"gemm_efficiency_tf32", &s.gemm_fraction_tf32},
      {"gemm_efficiency_bf16", &s.gemm_fraction_bf16},
      {"gemm_efficiency_fp16", &s.gemm_fraction_fp16},
      {"gemm_efficiency_fp8", &s.gemm_fraction_fp8},
      {"attention_efficiency", &s.attention_fraction},
      {"attention_backward_efficiency", &s.attention_backward_fraction},
  };
  for (const auto& [key, field] : keys) {
    *field = r.get_number_or(key, *field);
    if (!(*field >= 0 && *field <= 1))
      r.fail(key, json_excerpt(r.raw(key)),
             "a fraction of the dense peak from 0 to 1 (0: default)");
  }
}

}  // namespace

GpuSpec read_gpu_spec(ObjectReader& r) {
  GpuSpec s;
  try {
    s = find_gpu(r.get_string("base"), fmt::format("{}: {}", r.file(), r.pointer_of("base")));
  } catch (const ValidationError& e) {
    throw ConfigError(r.file(), r.pointer_of("base"), e.what());
  }
  const bool overridden =
      r.has("fp32") || r.has("tf32") || r.has("bf16") || r.has("fp16") || r.has("fp8") ||
      r.has("fp4") || r.has("hbm_capacity") || r.has("hbm_bandwidth") ||
      r.has("nvlink_bandwidth") || r.has("nvlink_generation") || r.has("pcie_generation") ||
      r.has("tdp_watts") || r.has("sm_count") || r.has("architecture") || r.has("power_limit_w") ||
      r.has("load_clock_fraction") || r.has("host_op_time") || r.has("gemm_efficiency_tf32") ||
      r.has("gemm_efficiency_bf16") || r.has("gemm_efficiency_fp16") ||
      r.has("gemm_efficiency_fp8") || r.has("attention_efficiency") ||
      r.has("attention_backward_efficiency");
  s.display_name =
      r.get_string_or("display_name", overridden ? s.display_name + " (custom)" : s.display_name);
  s.fp32_flops = r.get_quantity_or("fp32", Unit::FLOP_RATE, s.fp32_flops);
  s.tf32_flops = r.get_quantity_or("tf32", Unit::FLOP_RATE, s.tf32_flops);
  s.bf16_flops = r.get_quantity_or("bf16", Unit::FLOP_RATE, s.bf16_flops);
  s.fp16_flops = r.get_quantity_or("fp16", Unit::FLOP_RATE, s.fp16_flops);
  s.fp8_flops = r.get_quantity_or("fp8", Unit::FLOP_RATE, s.fp8_flops);
  s.fp4_flops = r.get_quantity_or("fp4", Unit::FLOP_RATE, s.fp4_flops);
  s.hbm_bytes = r.get_quantity_or("hbm_capacity", Unit::BYTES, s.hbm_bytes);
  if (r.has("hbm_capacity")) s.hbm_datasheet_bytes = s.hbm_bytes, s.capacity_source = "GPU JSON";
  s.hbm_bandwidth_Bps = r.get_quantity_or("hbm_bandwidth", Unit::BANDWIDTH, s.hbm_bandwidth_Bps);
  s.nvlink_bandwidth_Bps =
      r.get_quantity_or("nvlink_bandwidth", Unit::BANDWIDTH, s.nvlink_bandwidth_Bps);
  s.nvlink_generation =
      static_cast<int>(r.get_int_in_range_or("nvlink_generation", 0, 9, s.nvlink_generation));
  s.pcie_generation =
      static_cast<int>(r.get_int_in_range_or("pcie_generation", 1, 9, s.pcie_generation));
  s.tdp_watts = r.get_number_or("tdp_watts", s.tdp_watts);
  // MI300X's 304 CUs is the largest count shipped; 100,000 only rejects nonsense.
  s.sm_count = static_cast<int>(r.get_int_in_range_or("sm_count", 1, 100000, s.sm_count));
  const auto& arches = gpu_arch_names();
  const std::string arch = r.get_enum_or("architecture", arches, to_string(s.arch));
  s.arch = static_cast<GpuArch>(std::find(arches.begin(), arches.end(), arch) - arches.begin());
  if (r.has("sm_count") || r.has("architecture")) s.arch_source += " + overrides from " + r.file();
  if (!(s.tdp_watts >= 0 && s.tdp_watts <= 1e5))
    r.fail("tdp_watts", json_excerpt(r.raw("tdp_watts")), "a power in watts from 0 to 100000");
  s.power_limit_watts = r.get_number_or("power_limit_w", s.power_limit_watts);
  if (!(s.power_limit_watts >= 0 && s.power_limit_watts <= 1e5))
    r.fail("power_limit_w", json_excerpt(r.raw("power_limit_w")),
           "a power in watts from 0 to 100000 (0: the TDP)");
  s.host_op_s = r.get_quantity_or("host_op_time", Unit::TIME, s.host_op_s);
  if (!(s.host_op_s >= 0 && s.host_op_s < 1))
    r.fail("host_op_time", json_excerpt(r.raw("host_op_time")),
           "a host CPU time per eager op below 1 s, e.g. \"13.48us\" (0: the reference)");
  s.load_clock_fraction = r.get_number_or("load_clock_fraction", s.load_clock_fraction);
  if (!(s.load_clock_fraction >= 0 && s.load_clock_fraction <= 1))
    r.fail("load_clock_fraction", json_excerpt(r.raw("load_clock_fraction")),
           "a fraction from 0 to 1 (0: the default)");
  read_efficiencies(r, s);
  if (s.bf16_flops <= 0) r.fail("bf16", "0", "a positive FLOP rate, e.g. \"989TFLOPS\"");
  if (s.hbm_bytes <= 0) r.fail("hbm_capacity", "0", "a positive size, e.g. \"80GB\"");
  if (s.hbm_bandwidth_Bps <= 0)
    r.fail("hbm_bandwidth", "0", "a positive bandwidth, e.g. \"3.35TBps\"");
  if (overridden) s.source += " + overrides from " + r.file();
  r.finish();
  return s;
}

OrderedJson write_gpu_spec(const GpuSpec& g) {
  // fmt's "{}" prints a double's shortest representation that parses back to the same bits.
  auto rate = [](double v) { return fmt::format("{}FLOPS", v); };
  OrderedJson out{{"base", g.name},
                  {"display_name", g.display_name},
                  {"fp32", rate(g.fp32_flops)},
                  {"tf32", rate(g.tf32_flops)},
                  {"bf16", rate(g.bf16_flops)},
                  {"fp16", rate(g.fp16_flops)},
                  {"fp8", rate(g.fp8_flops)},
                  {"hbm_capacity", fmt::format("{}B", g.hbm_bytes)},
                  {"hbm_bandwidth", fmt::format("{}Bps", g.hbm_bandwidth_Bps)},
                  {"nvlink_bandwidth", fmt::format("{}Bps", g.nvlink_bandwidth_Bps)},
                  {"nvlink_generation", g.nvlink_generation},
                  {"pcie_generation", g.pcie_generation},
                  {"tdp_watts", g.tdp_watts},
                  {"sm_count", g.sm_count},
                  {"architecture", to_string(g.arch)}};
  if (g.fp4_flops > 0) out["fp4"] = rate(g.fp4_flops);
  // Optional figures are written only when set, so a default spec reads back unchanged.
  const std::pair<const char*, double> optional[] = {
      {"power_limit_w", g.power_limit_watts},
      {"load_clock_fraction", g.load_clock_fraction},
      {"gemm_efficiency_tf32", g.gemm_fraction_tf32},
      {"gemm_efficiency_bf16", g.gemm_fraction_bf16},
      {"gemm_efficiency_fp16", g.gemm_fraction_fp16},
      {"gemm_efficiency_fp8", g.gemm_fraction_fp8},
      {"attention_efficiency", g.attention_fraction},
      {"attention_backward_efficiency", g.attention_backward_fraction},
  };
  for (const auto& [key, value] : optional)
    if (value > 0) out[key] = value;
  // The host's time per op when it differs from the base's (0 included: the reference).
  if (g.host_op_s != find_gpu(g.name).host_op_s)
    out["host_op_time"] = fmt::format("{}s", g.host_op_s);
  return out;
}

GpuSpec load_gpu(std::string_view name_or_path, std::string_view field) {
  const std::string text(name_or_path);
  if (text.size() > 5 && text.substr(text.size() - 5) == ".json") {
    nlohmann::json doc = load_json_file(text, "GPU");
    ObjectReader r(doc, text, "");
    return read_gpu_spec(r);
  }
  return find_gpu(name_or_path, field);
}

}  // namespace loom::topo
