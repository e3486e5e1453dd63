#include <doctest/doctest.h>

#include <string>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "topologies/gpu_catalog.hpp"
#include "topologies/gpu_json.hpp"

using loom::topo::find_gpu;

TEST_CASE("topologies::GpuCatalog: datasheet figures, dense, NVLink per direction") {
  // NVIDIA H100 datasheet (SXM5): 989.4 TFLOP/s dense BF16 (1,979 sparse), 80 GB HBM3 at
  // 3.35 TB/s, NVLink 900 GB/s bidirectional -> 450 GB/s per direction, 700 W.
  const auto& h100 = find_gpu("h100-sxm");
  CHECK(h100.bf16_flops == doctest::Approx(989.4e12));
  CHECK(h100.fp8_flops == doctest::Approx(1978.9e12));
  CHECK(h100.hbm_bytes == doctest::Approx(80e9));
  CHECK(h100.hbm_bandwidth_Bps == doctest::Approx(3.35e12));
  CHECK(h100.nvlink_bandwidth_Bps == doctest::Approx(450e9));
  CHECK(h100.nvlink_generation == 4);
  CHECK(h100.pcie_generation == 5);
  CHECK(h100.tdp_watts == 700);
  CHECK(h100.source.find("H100") != std::string::npos);
  // NVIDIA A100 datasheet: 312 TFLOP/s BF16 dense, 80 GB at 2,039 GB/s, NVLink 600 GB/s.
  const auto& a100 = find_gpu("a100");
  CHECK(a100.name == "a100-sxm-80gb");
  CHECK(a100.bf16_flops == doctest::Approx(312e12));
  CHECK(a100.hbm_bandwidth_Bps == doctest::Approx(2039e9));
  CHECK(a100.nvlink_bandwidth_Bps == doctest::Approx(300e9));
  CHECK(a100.fp8_flops == 0);
  // L40S datasheet: no NVLink, 48 GB; AMD MI300X data sheet: 192 GB at 5.3 TB/s.
  CHECK(find_gpu("L40S").nvlink_bandwidth_Bps == 0);
  CHECK(find_gpu("mi300x").hbm_bytes == doctest::Approx(192e9));
  CHECK(find_gpu("mi300x").bf16_flops == doctest::Approx(1307.4e12));
  for (const char* key : {"a100-sxm-40gb", "a100-pcie-40gb", "a100-pcie-80gb", "h100-pcie",
                          "h100-nvl", "h200", "b200", "gb200", "rtx4090", "h100"}) {
    const auto& g = find_gpu(key);
    CHECK(g.bf16_flops > 0);
    CHECK(g.hbm_bytes > 0);
    CHECK(!g.source.empty());
  }
}

TEST_CASE("topologies::GpuCatalog: unknown name lists valid ones with did-you-mean") {
  try {
    find_gpu("h10O-sxm");
    FAIL("expected an error");
  } catch (const loom::ValidationError& e) {
    std::string m = e.what();
    CHECK(m.find("--gpu: unknown name 'h10O-sxm'") != std::string::npos);
    CHECK(m.find("did you mean 'h100-sxm'") != std::string::npos);
  }
}

TEST_CASE("topologies::GpuCatalog: JSON overrides with units") {
  auto doc = loom::parse_json_text(
      R"({"base": "h100-sxm", "hbm_capacity": "96GB", "nvlink_bandwidth": "300GBps"})", "t.json");
  loom::ObjectReader r(doc, "t.json", "");
  auto g = loom::topo::read_gpu_spec(r);
  CHECK(g.hbm_bytes == doctest::Approx(96e9));
  CHECK(g.nvlink_bandwidth_Bps == doctest::Approx(300e9));
  CHECK(g.bf16_flops == doctest::Approx(989.4e12));

  auto missing_unit = loom::parse_json_text(R"({"base": "h100", "hbm_capacity": "96"})", "t.json");
  loom::ObjectReader r2(missing_unit, "t.json", "");
  CHECK_THROWS_WITH_AS(loom::topo::read_gpu_spec(r2), doctest::Contains("has no unit"),
                       loom::ConfigError);

  auto typo = loom::parse_json_text(R"({"base": "h100", "hbm_capacty": "96GB"})", "t.json");
  loom::ObjectReader r3(typo, "t.json", "");
  CHECK_THROWS_WITH_AS(loom::topo::read_gpu_spec(r3),
                       doctest::Contains("did you mean 'hbm_capacity'"), loom::ConfigError);
}
