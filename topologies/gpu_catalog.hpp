#pragma once
// The GPU catalog: datasheet figures per GPU model (dense peak FLOP/s per dtype, HBM size
// and bandwidth, NVLink bandwidth, PCIe generation, TDP, SM count, architecture),
// overridable from JSON.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"

namespace loom::topo {

/// Sustained-to-boost clock ratio under full load at the TDP: NVIDIA's HPL Rpeak for A100
/// uses the 1305 MHz clock the GPU sustains at its power limit, against its 1410 MHz boost
/// (G. Lockwood, "Peak FLOPS", glennklockwood.com/garden/peak-FLOPS, on NVIDIA's Rpeak
/// convention). Applied to every GPU without its own figure (GpuSpec::load_clock_fraction; the
/// catalog's H100 SXM, H200, B200, B300 and MI300X have measured ones and GB200 and GB300
/// ones derived from them, gpu_catalog.cpp), an extrapolation docs/defaults.md states.
inline constexpr double DEFAULT_LOAD_CLOCK_FRACTION = 1305.0 / 1410.0;

/// GPU architecture (generation), from the vendor's whitepaper. Read by the kernel-time model
/// and by NCCL's tuning tables (sim/nccl_model.hpp), never guessed from a GPU's name.
enum class GpuArch { VOLTA, AMPERE, ADA, HOPPER, BLACKWELL, CDNA3 };
/// "volta", "ampere", "ada", "hopper", "blackwell", "cdna3".
std::string to_string(GpuArch arch);
/// The architecture names a GPU JSON accepts, in enum order.
const std::vector<std::string>& gpu_arch_names();

/// One GPU model's datasheet. Peak rates are dense (no 2:4 sparsity); 0 means unsupported.
struct GpuSpec {
  std::string name;          ///< catalog key, e.g. "h100-sxm"
  std::string display_name;  ///< e.g. "H100 SXM5 80GB"
  std::string vendor;        ///< "nvidia" or "amd"
  double fp32_flops = 0;     ///< FLOP/s, non-tensor fp32
  double tf32_flops = 0;     ///< FLOP/s, tensor-core tf32
  double bf16_flops = 0;     ///< FLOP/s, tensor-core bf16
  double fp16_flops = 0;     ///< FLOP/s, tensor-core fp16
  double fp8_flops = 0;      ///< FLOP/s, tensor-core fp8 (0 when the GPU has none)
  double fp4_flops = 0;      ///< FLOP/s, tensor-core fp4 (0 when the GPU has none)
  /// Memory a process can allocate, in bytes: the total the CUDA runtime reports
  /// (cudaMemGetInfo, torch.cuda.get_device_properties().total_memory), below the
  /// datasheet's figure by what the driver keeps; the CUDA context comes out of it.
  double hbm_bytes = 0;
  double hbm_datasheet_bytes = 0;  ///< the datasheet's capacity in bytes (GB = 1e9), a label
  std::string capacity_source = "datasheet";  ///< where hbm_bytes comes from
  double hbm_bandwidth_Bps = 0;               ///< memory bandwidth in bytes per second
  double nvlink_bandwidth_Bps = 0;            ///< NVLink per GPU per direction, bytes/s (0: none)
  int nvlink_generation = 0;                  ///< 3, 4, 5; 0 when the GPU has no NVLink
  int pcie_generation = 4;                    ///< host PCIe generation (x16)
  double tdp_watts = 0;  ///< board power in watts (the limit the peaks hold at)
  /// Sustained board power limit in watts the GPU runs under (e.g. a 500 W H100 SXM); 0:
  /// the TDP. Below the TDP, compute-bound kernels run at a lower sustained clock
  /// (topologies/kernel_model.hpp, sustained_clock_fraction).
  double power_limit_watts = 0;
  /// Clock a GPU sustains under continuous full tensor-core load at its TDP, relative to the
  /// boost clock its datasheet peak assumes, in (0, 1]; 0: DEFAULT_LOAD_CLOCK_FRACTION.
  /// Short GEMM benchmarks (the measured GEMM fractions) run at boost; a training step keeps
  /// every GPU of a node at its power limit for its whole length.
  double load_clock_fraction = 0;
  /// CPU seconds the GPU's host spends per eager framework op (Python, the ATen dispatcher,
  /// the launch): how fast the system's CPU issues kernels; 0: the reference
  /// (strategies::REFERENCE_HOST_LAUNCH_S). Systems differ: Grace hosts take 2.75x a DGX
  /// H100's Xeon per op (gpu_catalog.cpp).
  double host_op_s = 0;
  /// Fraction of the dense peak a large GEMM reaches, per tensor-core dtype; 0: the
  /// architecture's measured figure (kernel_model.hpp, architecture_gemm_fraction).
  double gemm_fraction_tf32 = 0;
  double gemm_fraction_bf16 = 0;  ///< as gemm_fraction_tf32, for bf16
  double gemm_fraction_fp16 = 0;  ///< as gemm_fraction_tf32, for fp16
  double gemm_fraction_fp8 = 0;   ///< as gemm_fraction_tf32, for fp8
  /// Fraction of the dense peak a fused attention forward reaches; 0: the architecture's
  /// figure (kernel_model.hpp, architecture_attention_fraction).
  double attention_fraction = 0;
  /// Fraction of the dense peak a fused attention backward reaches at the same reference
  /// shape; 0: the forward's times GpuEfficiency::attention_backward_ratio.
  double attention_backward_fraction = 0;
  int sm_count = 0;                ///< streaming multiprocessors (AMD: compute units)
  GpuArch arch = GpuArch::AMPERE;  ///< architecture
  std::string source;              ///< datasheet citation
  std::string arch_source;         ///< citation for sm_count and arch (whitepaper)
};

/// `catalog` with each GPU's hbm_bytes set to the memory its runtime reports (and
/// capacity_source to where that figure comes from); GPUs without a figure keep theirs.
std::vector<GpuSpec> with_runtime_capacity(std::vector<GpuSpec> catalog);

/// Every GPU in the catalog, in a fixed order.
const std::vector<GpuSpec>& gpu_catalog();
/// The names users may type (catalog keys and aliases), sorted.
std::vector<std::string> gpu_names();
/// The catalog key `name` stands for: a key or alias (case-insensitive), a catalog display
/// name, or a name vendors and `nvidia-smi` print ("NVIDIA H100 80GB HBM3",
/// "NVIDIA A100-SXM4-80GB", "H100-SXM5-80GB", "NVIDIA H200"); nullopt when none.
std::optional<std::string> gpu_key(std::string_view name);
/// The name of `valid` to suggest for the unknown GPU `name`: one of its family ("h100" for
/// "H100-96GB") when `valid` has one, else the closest by edit distance; "" for none.
std::string suggest_gpu_name(std::string_view name, const std::vector<std::string>& valid);
/// The ValidationError for an unknown GPU name: "FIELD: unknown name 'X' (did you mean 'Y'?);
/// valid: ...", Y from suggest_gpu_name.
ValidationError unknown_gpu(std::string_view field, std::string_view name,
                            const std::vector<std::string>& valid);
/// Looks up a GPU by anything gpu_key() takes; throws ValidationError listing the valid names,
/// with did-you-mean (unknown_gpu), naming `field` (e.g. "gpu"; the CLI passes "--gpu").
const GpuSpec& find_gpu(std::string_view name, std::string_view field = "gpu");
/// A catalog GPU by name, or, when `name_or_path` ends in ".json", a GPU JSON file holding a
/// catalog "base" plus overrides (see topologies/gpu_json.hpp and docs/clusters.md). Throws
/// ValidationError on an unknown name, ConfigError on a bad file.
GpuSpec load_gpu(std::string_view name_or_path, std::string_view field = "gpu");

}  // namespace loom::topo
