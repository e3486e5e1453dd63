// Issue 33: the GPU names users paste. nvidia-smi --query-gpu=name and vendors print names
// like "NVIDIA H100 80GB HBM3" (the SXM5 board), "NVIDIA A100-SXM4-80GB", "NVIDIA H200",
// "NVIDIA B200"; loom takes them as aliases of its catalog keys. An unknown name is answered
// with a GPU of the same family ("H100-96GB" -> an H100), not the nearest string of another
// family ("H100-80GB" was once answered 'a100-80gb').
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "common/error.hpp"
#include "topologies/gpu_catalog.hpp"

using loom::topo::find_gpu;
using loom::topo::gpu_key;
using loom::topo::gpu_names;
using loom::topo::suggest_gpu_name;

TEST_CASE("topologies::gpu_names: the names nvidia-smi and vendors print are aliases") {
  CHECK(find_gpu("NVIDIA H100 80GB HBM3").name == "h100-sxm");
  CHECK(find_gpu("H100-SXM5-80GB").name == "h100-sxm");
  CHECK(find_gpu("H100-80GB").name == "h100-sxm");
  CHECK(find_gpu("NVIDIA H100 PCIe").name == "h100-pcie");
  CHECK(find_gpu("NVIDIA H100 NVL").name == "h100-nvl");
  CHECK(find_gpu("NVIDIA A100-SXM4-80GB").name == "a100-sxm-80gb");
  CHECK(find_gpu("NVIDIA A100-SXM4-40GB").name == "a100-sxm-40gb");
  CHECK(find_gpu("NVIDIA A100 80GB PCIe").name == "a100-pcie-80gb");
  CHECK(find_gpu("NVIDIA A100-PCIE-40GB").name == "a100-pcie-40gb");
  CHECK(find_gpu("NVIDIA H200").name == "h200");
  CHECK(find_gpu("NVIDIA H200 NVL").name == "h200-nvl");
  CHECK(find_gpu("NVIDIA B200").name == "b200");
  CHECK(find_gpu("NVIDIA GeForce RTX 4090").name == "rtx4090");
  CHECK(find_gpu("NVIDIA L40S").name == "l40s");
  CHECK(find_gpu("AMD Instinct MI300X").name == "mi300x");
  // The catalog's own display names, as `loom presets gpus` prints them.
  CHECK(find_gpu("H100 SXM5 80GB").name == "h100-sxm");
  CHECK(find_gpu("A100 SXM4 80GB").name == "a100-sxm-80gb");
  // Keys and short aliases as before, any case.
  CHECK(find_gpu("H100").name == "h100-sxm");
  CHECK(find_gpu("a100-80gb").name == "a100-sxm-80gb");
  CHECK_FALSE(gpu_key("NVIDIA Z900").has_value());
}

TEST_CASE("topologies::gpu_names: the vendor aliases are accepted, not listed among the valid") {
  for (const auto& name : gpu_names()) CHECK(name.find(' ') == std::string::npos);
  const auto names = gpu_names();
  CHECK(std::find(names.begin(), names.end(), "h100-80gb-hbm3") == names.end());
}

TEST_CASE("topologies::gpu_names: a suggestion keeps the GPU family") {
  const auto names = gpu_names();
  // One edit from 'a100-80gb', but an H100: suggest an H100.
  CHECK(suggest_gpu_name("H100-96GB", names).rfind("h100", 0) == 0);
  CHECK(suggest_gpu_name("H100-SMX", names) == "h100-sxm");
  CHECK(suggest_gpu_name("b20", names) == "b200");
  CHECK(suggest_gpu_name("H20O", names).rfind("h200", 0) == 0);  // one edit from the family
  // A family loom does not have: no look-alike from another family.
  CHECK(suggest_gpu_name("V100-32GB", names).empty());
  try {
    find_gpu("H100-96GB", "--gpu");
    FAIL("an unknown GPU name was accepted");
  } catch (const loom::ValidationError& e) {
    const std::string m = e.what();
    CHECK(m.find("--gpu: unknown name 'H100-96GB' (did you mean 'h100") != std::string::npos);
    CHECK(m.find("a100-80gb'?") == std::string::npos);
  }
}
