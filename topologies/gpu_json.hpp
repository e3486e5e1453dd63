#pragma once
// Reading a GPU spec from JSON: {"base": "h100-sxm", "hbm_capacity": "96GB", ...}. A
// catalog entry plus overrides, every quantity with its unit. Include only from .cpp files
// (pulls in nlohmann/json through common/json_util.hpp).
#include "common/document.hpp"
#include "common/json_util.hpp"
#include "topologies/gpu_catalog.hpp"

namespace loom::topo {

/// Reads a GPU object: required "base" (a catalog name) and optional overrides "display_name",
/// "fp32", "tf32", "bf16", "fp16", "fp8" (FLOP/s, e.g. "989TFLOPS"), "hbm_capacity" (bytes,
/// "80GB"), "hbm_bandwidth" ("3.35TBps"), "nvlink_bandwidth" (per direction, "450GBps"),
/// "nvlink_generation", "pcie_generation", "tdp_watts", "sm_count" (plain numbers),
/// "architecture" ("volta", "ampere", "ada", "hopper", "blackwell", "cdna3"), "power_limit_w"
/// (the sustained power cap in watts, 0 = the TDP), "load_clock_fraction", "host_op_time" (the
/// host CPU time per eager op, "13.48us"; 0 = the reference), "gemm_efficiency_tf32", "_bf16",
/// "_fp16", "_fp8", "attention_efficiency" and "attention_backward_efficiency" (measured
/// fractions of the dense peak, 0 = the architecture default; the backward's default is the
/// forward's times 0.8); every key absent keeps the base GPU's value. Throws ConfigError on an
/// unknown key (did-you-mean), a missing unit or a non-positive bf16/HBM figure, and
/// ValidationError on an unknown base name.
GpuSpec read_gpu_spec(ObjectReader& reader);

/// Writes `gpu` as a GPU object read_gpu_spec accepts back to the same figures: "base" (its
/// catalog name), "display_name" and every override key, quantities with their units in
/// shortest round-trip form ("9.894e+14FLOPS"). Citations are not written.
OrderedJson write_gpu_spec(const GpuSpec& gpu);

}  // namespace loom::topo
