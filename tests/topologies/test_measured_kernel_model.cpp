// The kernel model calibrated by measured GEMMs and memory bandwidth: measured shapes take
// their measured time, nearby shapes the datasheet time scaled by the measured ratio, other
// dtypes and kinds the datasheet model.
#include <doctest/doctest.h>

#include <cmath>

#include "common/error.hpp"
#include "topologies/gpu_catalog.hpp"
#include "topologies/measured_kernel_model.hpp"

using namespace loom;
using namespace loom::topo;

namespace {

KernelOp gemm(std::int64_t m, std::int64_t n, std::int64_t k) {
  KernelOp op;
  op.m = m;
  op.n = n;
  op.k = k;
  op.forward_flops = op.backward_input_flops = op.backward_weight_flops =
      2.0 * double(m) * double(n) * double(k);
  return op;
}

double datasheet_s(const DatasheetKernelModel& d, std::int64_t m, std::int64_t n, std::int64_t k,
                   DType math = DType::BF16) {
  return d.seconds(gemm(m, n, k), KernelPass::FORWARD, math);
}

}  // namespace

TEST_CASE("topologies::MeasuredKernelModel: a GEMM measured at 2x the datasheet") {
  const GpuSpec h100 = find_gpu("h100-sxm");
  const DatasheetKernelModel datasheet(h100);
  MeasuredKernels measured;
  for (std::int64_t s : {2048, 8192})
    measured.gemms.push_back({DType::BF16, s, s, s, 2 * datasheet_s(datasheet, s, s, s)});
  const MeasuredKernelModel model(h100, {}, measured);
  // The measured shape: exactly the measured time.
  CHECK(model.seconds(gemm(2048, 2048, 2048), KernelPass::FORWARD, DType::BF16) ==
        2 * datasheet_s(datasheet, 2048, 2048, 2048));
  // A shape between them: every neighbour's ratio is 2, so 2x its own datasheet time.
  CHECK(model.seconds(gemm(4096, 3072, 5120), KernelPass::FORWARD, DType::BF16) ==
        doctest::Approx(2 * datasheet_s(datasheet, 4096, 3072, 5120)).epsilon(1e-9));
  // Beyond the measured shapes the nearest ratio holds.
  CHECK(model.seconds(gemm(32768, 4096, 4096), KernelPass::FORWARD, DType::BF16) ==
        doctest::Approx(2 * datasheet_s(datasheet, 32768, 4096, 4096)).epsilon(1e-9));
  // A batched GEMM of a measured shape: the datasheet's batched time x the ratio.
  KernelOp batched = gemm(2048, 2048, 2048);
  batched.batch = 4;
  batched.forward_flops *= 4;
  CHECK(model.seconds(batched, KernelPass::FORWARD, DType::BF16) ==
        doctest::Approx(2 * datasheet.seconds(batched, KernelPass::FORWARD, DType::BF16)).scale(0));
  CHECK(model.peak_flops(DType::BF16) == datasheet.peak_flops(DType::BF16));
}

TEST_CASE("topologies::MeasuredKernelModel: ratios interpolate geometrically by log distance") {
  const GpuSpec h100 = find_gpu("h100-sxm");
  const DatasheetKernelModel datasheet(h100);
  MeasuredKernels measured;
  measured.gemms.push_back(
      {DType::BF16, 1024, 4096, 4096, 2 * datasheet_s(datasheet, 1024, 4096, 4096)});
  measured.gemms.push_back(
      {DType::BF16, 4096, 4096, 4096, datasheet_s(datasheet, 4096, 4096, 4096)});
  const MeasuredKernelModel model(h100, {}, measured);
  // m = 2048 is as far from 1024 as from 4096 in log m: equal weights, ratio sqrt(2 x 1).
  CHECK(model.gemm_ratio(2048, 4096, 4096, DType::BF16).value() == doctest::Approx(std::sqrt(2.0)));
  // Three times nearer 1024 (log distances 1/4 and 3/4 of the way): weights 9 : 1.
  const std::int64_t m = static_cast<std::int64_t>(std::llround(1024 * std::pow(2.0, 0.5)));
  const double w = std::pow(std::log(4096.0 / m) / std::log(double(m) / 1024), 2);
  CHECK(model.gemm_ratio(m, 4096, 4096, DType::BF16).value() ==
        doctest::Approx(std::exp(w * std::log(2.0) / (w + 1))).epsilon(1e-6));
}

TEST_CASE("topologies::MeasuredKernelModel: backward passes are looked up by their own shapes") {
  const GpuSpec h100 = find_gpu("h100-sxm");
  const DatasheetKernelModel datasheet(h100);
  // dA of a [2048 x 4096]·[4096 x 8192] GEMM is [2048 x 8192]·[8192 x 4096].
  MeasuredKernels measured;
  measured.gemms.push_back({DType::BF16, 2048, 4096, 8192, 123e-6});
  const MeasuredKernelModel model(h100, {}, measured);
  CHECK(model.seconds(gemm(2048, 8192, 4096), KernelPass::BACKWARD_INPUT, DType::BF16) == 123e-6);
  // The forward shape is not measured: its datasheet time x the measured point's ratio.
  const double ratio = 123e-6 / datasheet_s(datasheet, 2048, 4096, 8192);
  CHECK(model.gemm_ratio(2048, 8192, 4096, DType::BF16).value() == doctest::Approx(ratio));
  CHECK(model.seconds(gemm(2048, 8192, 4096), KernelPass::FORWARD, DType::BF16) ==
        doctest::Approx(datasheet_s(datasheet, 2048, 8192, 4096) * ratio).scale(0));
}

TEST_CASE(
    "topologies::MeasuredKernelModel: dtypes without points and attention keep the "
    "datasheet") {
  const GpuSpec h100 = find_gpu("h100-sxm");
  const DatasheetKernelModel datasheet(h100);
  MeasuredKernels measured;
  measured.gemms.push_back({DType::BF16, 4096, 4096, 4096, 1e-3});
  measured.gemms.push_back({DType::TF32, 4096, 4096, 4096, 2e-3});
  const MeasuredKernelModel model(h100, {}, measured);
  for (DType d : {DType::FP16, DType::FP8}) {
    CHECK(model.seconds(gemm(4096, 4096, 4096), KernelPass::FORWARD, d) ==
          datasheet_s(datasheet, 4096, 4096, 4096, d));
  }
  // fp32 math runs on TF32 tensor cores: the TF32 point applies.
  CHECK(model.seconds(gemm(4096, 4096, 4096), KernelPass::FORWARD, DType::FP32) == 2e-3);
  KernelOp attention;
  attention.kind = KernelKind::ATTENTION;
  attention.fused = true;
  attention.forward_flops = 1e12;
  attention.backward_input_flops = 2e12;
  for (KernelPass p : {KernelPass::FORWARD, KernelPass::BACKWARD_INPUT}) {
    CHECK(model.seconds(attention, p, DType::BF16) == datasheet.seconds(attention, p, DType::BF16));
  }
}

TEST_CASE(
    "topologies::MeasuredKernelModel: memory-bound work streams at the measured "
    "bandwidth") {
  const GpuSpec h100 = find_gpu("h100-sxm");
  MeasuredKernels measured;
  measured.memory_Bps = 2.9e12;
  const MeasuredKernelModel model(h100, {}, measured);
  KernelOp elementwise;
  elementwise.kind = KernelKind::MEMORY_BOUND;
  elementwise.bytes = 1e9;
  const double overhead = GpuEfficiency{}.kernel_overhead_s;
  CHECK(model.seconds(elementwise, KernelPass::FORWARD, DType::BF16) ==
        doctest::Approx(1e9 / 2.9e12 + overhead).scale(0));
  // The backward moves twice the bytes (GpuEfficiency::memory_backward_factor).
  CHECK(model.seconds(elementwise, KernelPass::BACKWARD_INPUT, DType::BF16) ==
        doctest::Approx(2e9 / 2.9e12 + overhead).scale(0));
  KernelOp optimizer;
  optimizer.kind = KernelKind::OPTIMIZER;
  optimizer.bytes = 4e9;
  CHECK(model.seconds(optimizer, KernelPass::FORWARD, DType::BF16) ==
        doctest::Approx(4e9 / 2.9e12 + overhead).scale(0));
  // Without a bandwidth: the datasheet's HBM x 0.8.
  const MeasuredKernelModel plain(h100, {}, {});
  CHECK(plain.seconds(elementwise, KernelPass::FORWARD, DType::BF16) ==
        doctest::Approx(1e9 / (h100.hbm_bandwidth_Bps * 0.8) + overhead).scale(0));
}

TEST_CASE("topologies::MeasuredKernelModel: a non-positive measurement is an internal error") {
  MeasuredKernels measured;
  measured.gemms.push_back({DType::BF16, 4096, 0, 4096, 1e-3});
  CHECK_THROWS_AS(MeasuredKernelModel(find_gpu("h100-sxm"), {}, measured), InternalError);
}
