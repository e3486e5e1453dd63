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
  CHECK(h100.hbm_datasheet_bytes == doctest::Approx(80e9));
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
  CHECK(find_gpu("mi300x").hbm_datasheet_bytes == doctest::Approx(192e9));
  CHECK(find_gpu("mi300x").bf16_flops == doctest::Approx(1307.4e12));
  for (const char* key :
       {"a100-sxm-40gb", "a100-pcie-40gb", "a100-pcie-80gb", "h100-pcie", "h100-nvl", "h200",
        "b200", "gb200", "b300", "gb300", "rtx4090", "h100"}) {
    const auto& g = find_gpu(key);
    CHECK(g.bf16_flops > 0);
    CHECK(g.hbm_bytes > 0);
    CHECK(g.capacity_source != "datasheet");
    CHECK(!g.source.empty());
  }
}

TEST_CASE("topologies::GpuCatalog: Blackwell Ultra B300 and GB300 dense peaks") {
  // DGX/HGX B300 datasheet (1100 W): dense BF16 2250, FP8 4500 TF, 270 GB at 7.7 TB/s.
  // GB300 NVL72 product page: 180 PF BF16 / 360 PF FP8 dense, 20 TB at 576 TB/s per 72 GPUs.
  const auto& b300 = find_gpu("b300");
  CHECK(b300.bf16_flops == doctest::Approx(2250e12));
  CHECK(b300.fp8_flops == doctest::Approx(4500e12));
  CHECK(b300.hbm_bandwidth_Bps == doctest::Approx(7.7e12));
  CHECK(b300.arch == loom::topo::GpuArch::BLACKWELL);
  const auto& gb300 = find_gpu("gb300");
  CHECK(gb300.bf16_flops * 72 == doctest::Approx(180e15));
  CHECK(gb300.fp8_flops * 72 == doctest::Approx(360e15));
  CHECK(gb300.hbm_bandwidth_Bps * 72 == doctest::Approx(576e12));
  CHECK(gb300.hbm_datasheet_bytes * 72 == doctest::Approx(20e12).epsilon(0.01));
  CHECK(gb300.tdp_watts == 1400);
}

TEST_CASE("topologies::GpuCatalog: unknown name lists valid ones with did-you-mean") {
  try {
    find_gpu("h10O-sxm");
    FAIL("expected an error");
  } catch (const loom::ValidationError& e) {
    std::string m = e.what();
    CHECK(m.rfind("gpu: unknown name 'h10O-sxm'", 0) == 0);  // the plain key, not a flag
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

TEST_CASE("topologies::GpuCatalog: SM counts and architectures from the whitepapers") {
  using loom::topo::GpuArch;
  // A100 whitepaper: 108 SMs (Ampere). H100 whitepaper: SXM5 132 SMs, PCIe 114 (Hopper).
  // Ada whitepaper: RTX 4090 128 SMs; L40S datasheet 18,176 CUDA cores / 128 = 142.
  // AMD MI300X data sheet: 304 CUs (CDNA 3).
  CHECK(find_gpu("a100-pcie-40gb").sm_count == 108);
  CHECK(find_gpu("a100").arch == GpuArch::AMPERE);
  CHECK(find_gpu("h100-sxm").sm_count == 132);
  CHECK(find_gpu("h100-pcie").sm_count == 114);
  CHECK(find_gpu("h200").arch == GpuArch::HOPPER);
  CHECK(find_gpu("rtx4090").sm_count == 128);
  CHECK(find_gpu("l40s").sm_count == 142);
  CHECK(find_gpu("l40s").arch == GpuArch::ADA);
  CHECK(find_gpu("b200").arch == GpuArch::BLACKWELL);
  CHECK(find_gpu("mi300x").sm_count == 304);
  CHECK(find_gpu("mi300x").arch == GpuArch::CDNA3);
  for (const auto& g : loom::topo::gpu_catalog()) {
    CHECK(g.sm_count > 0);
    CHECK(!g.arch_source.empty());
  }
  CHECK(loom::topo::to_string(GpuArch::BLACKWELL) == "blackwell");
}

TEST_CASE("topologies::GpuCatalog: JSON inherits SM count and architecture from its base") {
  using loom::topo::GpuArch;
  auto doc = loom::parse_json_text(R"({"base": "h100-pcie", "hbm_capacity": "96GB"})", "t.json");
  loom::ObjectReader r(doc, "t.json", "");
  auto g = loom::topo::read_gpu_spec(r);
  CHECK(g.sm_count == 114);
  CHECK(g.arch == GpuArch::HOPPER);

  auto over = loom::parse_json_text(
      R"({"base": "h100-sxm", "sm_count": 78, "architecture": "blackwell"})", "t.json");
  loom::ObjectReader r2(over, "t.json", "");
  auto o = loom::topo::read_gpu_spec(r2);
  CHECK(o.sm_count == 78);
  CHECK(o.arch == GpuArch::BLACKWELL);
  CHECK(o.bf16_flops == doctest::Approx(989.4e12));
  CHECK(o.arch_source.find("overrides from t.json") != std::string::npos);

  auto zero = loom::parse_json_text(R"({"base": "h100", "sm_count": 0})", "t.json");
  loom::ObjectReader r3(zero, "t.json", "");
  CHECK_THROWS_WITH_AS(loom::topo::read_gpu_spec(r3), doctest::Contains("/sm_count"),
                       loom::ConfigError);
  auto typo = loom::parse_json_text(R"({"base": "h100", "architecture": "hoper"})", "t.json");
  loom::ObjectReader r4(typo, "t.json", "");
  CHECK_THROWS_WITH_AS(loom::topo::read_gpu_spec(r4), doctest::Contains("did you mean 'hopper'"),
                       loom::ConfigError);
}

TEST_CASE("topologies::GpuCatalog: a written GPU object reads back to the same spec") {
  // A custom Hopper part: every field differs from its base, and the writer must carry each.
  loom::topo::GpuSpec g = find_gpu("h100-sxm");
  g.display_name = "H100 test part";
  g.fp8_flops = 0;
  g.bf16_flops = 123.456789e12;
  g.hbm_bytes = 96e9;
  g.hbm_bandwidth_Bps = 3.9e12 / 7;  // not a short decimal: shortest round-trip form
  g.nvlink_generation = 3;
  g.tdp_watts = 612.5;
  g.sm_count = 114;
  g.arch = loom::topo::GpuArch::ADA;
  g.power_limit_watts = 500;
  g.gemm_fraction_fp8 = 0.65;
  g.attention_fraction = 0.5;
  g.attention_backward_fraction = 0.375;
  g.host_op_s = 21.5e-6;
  const loom::OrderedJson out = loom::topo::write_gpu_spec(g);
  CHECK(out["power_limit_w"] == 500);
  CHECK(!out.contains("gemm_efficiency_bf16"));  // unset: the architecture's default
  CHECK(out["base"] == "h100-sxm");
  CHECK(out["architecture"] == "ada");
  auto doc = nlohmann::json::parse(out.dump());
  loom::ObjectReader r(doc, "w.json", "");
  const auto back = loom::topo::read_gpu_spec(r);
  CHECK(back.display_name == g.display_name);
  CHECK(back.host_op_s == doctest::Approx(g.host_op_s));
  CHECK(back.fp32_flops == g.fp32_flops);
  CHECK(back.tf32_flops == g.tf32_flops);
  CHECK(back.bf16_flops == g.bf16_flops);
  CHECK(back.fp16_flops == g.fp16_flops);
  CHECK(back.fp8_flops == 0);
  CHECK(back.hbm_bytes == g.hbm_bytes);
  CHECK(back.hbm_bandwidth_Bps == g.hbm_bandwidth_Bps);
  CHECK(back.nvlink_bandwidth_Bps == g.nvlink_bandwidth_Bps);
  CHECK(back.nvlink_generation == 3);
  CHECK(back.pcie_generation == g.pcie_generation);
  CHECK(back.tdp_watts == 612.5);
  CHECK(back.sm_count == 114);
  CHECK(back.arch == loom::topo::GpuArch::ADA);
  CHECK(back.power_limit_watts == 500);
  CHECK(back.gemm_fraction_fp8 == 0.65);
  CHECK(back.gemm_fraction_bf16 == 0);
  CHECK(back.attention_fraction == 0.5);
  CHECK(back.attention_backward_fraction == 0.375);
}

TEST_CASE("topologies::GpuCatalog: a new forward attention figure drops the base's backward") {
  // B300's catalog entry has both figures; a JSON giving only the forward derives the
  // backward from it again (x 0.8), a JSON giving both keeps both.
  auto only_fwd = nlohmann::json::parse(R"({"base": "b300", "attention_efficiency": 0.6})");
  loom::ObjectReader r1(only_fwd, "g.json", "");
  CHECK(loom::topo::read_gpu_spec(r1).attention_backward_fraction == 0);
  auto both = nlohmann::json::parse(
      R"({"base": "b300", "attention_efficiency": 0.6, "attention_backward_efficiency": 0.5})");
  loom::ObjectReader r2(both, "g.json", "");
  CHECK(loom::topo::read_gpu_spec(r2).attention_backward_fraction == 0.5);
  auto none = nlohmann::json::parse(R"({"base": "b300"})");
  loom::ObjectReader r3(none, "g.json", "");
  CHECK(loom::topo::read_gpu_spec(r3).attention_backward_fraction > 0);
}

TEST_CASE("topologies::GpuCatalog: a GPU JSON rejects a GEMM efficiency above 1") {
  auto doc = nlohmann::json::parse(R"({"base": "h100", "gemm_efficiency_bf16": 1.2})");
  loom::ObjectReader r(doc, "g.json", "");
  CHECK_THROWS_AS(loom::topo::read_gpu_spec(r), loom::ConfigError);
  auto bwd = nlohmann::json::parse(R"({"base": "h100", "attention_backward_efficiency": -0.1})");
  loom::ObjectReader rb(bwd, "g.json", "");
  CHECK_THROWS_WITH_AS(loom::topo::read_gpu_spec(rb),
                       doctest::Contains("attention_backward_efficiency"), loom::ConfigError);
}

TEST_CASE("topologies::GpuCatalog: the host's time per eager op, by system") {
  // TE issue #2053: one torch Linear forward costs the host 13.48 us on a DGX H100 (Xeon
  // Platinum 8480C) and 37.08 us on a GB200 (Grace); the Xeon figure is taken for the HGX /
  // DGX boards, the Grace one for the NVL72 systems; GPUs without a measured host keep 0.
  using loom::topo::find_gpu;
  for (const char* xeon : {"h100-sxm", "h200", "b200", "b300"})
    CHECK_MESSAGE(find_gpu(xeon).host_op_s == doctest::Approx(13.48e-6), xeon);
  for (const char* grace : {"gb200", "gb300"})
    CHECK_MESSAGE(find_gpu(grace).host_op_s == doctest::Approx(37.08e-6), grace);
  CHECK(find_gpu("a100-sxm-80gb").host_op_s == 0);
  auto doc = loom::parse_json_text(R"({"base": "h100-sxm", "host_op_time": "20us"})", "t.json");
  loom::ObjectReader r(doc, "t.json", "");
  CHECK(loom::topo::read_gpu_spec(r).host_op_s == doctest::Approx(20e-6));
  // Written back whenever it differs from the base's, 0 (the reference) included.
  auto zero = loom::parse_json_text(R"({"base": "h100-sxm", "host_op_time": "0s"})", "t.json");
  loom::ObjectReader rz(zero, "t.json", "");
  const auto unmeasured = loom::topo::read_gpu_spec(rz);
  CHECK(unmeasured.host_op_s == 0);
  auto again = nlohmann::json::parse(loom::topo::write_gpu_spec(unmeasured).dump());
  loom::ObjectReader ra(again, "w.json", "");
  CHECK(loom::topo::read_gpu_spec(ra).host_op_s == 0);
  CHECK(!loom::topo::write_gpu_spec(find_gpu("h100-sxm")).contains("host_op_time"));
  auto slow = loom::parse_json_text(R"({"base": "h100-sxm", "host_op_time": "2s"})", "t.json");
  loom::ObjectReader r2(slow, "t.json", "");
  CHECK_THROWS_WITH_AS(loom::topo::read_gpu_spec(r2), doctest::Contains("host_op_time"),
                       loom::ConfigError);
}

TEST_CASE("topologies::GpuCatalog: a GPU holds what its runtime reports, not the datasheet GB") {
  // An "80 GB" H100 SXM5 is not 80e9 B = 74.5 GiB: PyTorch reports a total capacity of
  // 79.11 GiB (cudaMemGetInfo; nvidia-smi shows 81,559 MiB with the driver's reservation).
  const double gib = 1024.0 * 1024 * 1024;
  const auto& h100 = find_gpu("h100-sxm");
  CHECK(h100.hbm_bytes == doctest::Approx(79.11 * gib));
  CHECK(h100.hbm_bytes > 81559.0 * 1024 * 1024 - 1.0 * gib);  // within 1 GiB of nvidia-smi
  CHECK(h100.hbm_bytes < 81559.0 * 1024 * 1024);
  // This project's H200: cudaMemGetInfo total 150,109,880,320 B (tests/validation/measured/
  // h200-2026-11-28), nvidia-smi 143,771 MiB.
  CHECK(find_gpu("h200").hbm_bytes == doctest::Approx(150109880320.0));
  CHECK(find_gpu("h200").hbm_bytes < 143771.0 * 1024 * 1024);
  CHECK(find_gpu("a100-sxm-80gb").hbm_bytes == doctest::Approx(79.15 * gib));
  CHECK(find_gpu("h100-nvl").hbm_bytes == doctest::Approx(93.10 * gib));
  // A plan needing 79 GiB fits an H100 80GB (it did not at 80e9 B).
  CHECK(79.0 * gib <= h100.hbm_bytes);
  CHECK(79.0 * gib > h100.hbm_datasheet_bytes);
}
