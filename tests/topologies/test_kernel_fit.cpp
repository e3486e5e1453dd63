// The kernel fit (topologies/kernel_fit.hpp): sweeps loom's own kernel model produced with
// altered parameters are recovered, and shapes left out of the fit follow the fitted curve.
#include <doctest/doctest.h>

#include <cmath>

#include "topologies/gpu_catalog.hpp"
#include "topologies/kernel_fit.hpp"

using namespace loom;
using namespace loom::topo;

namespace {

KernelOp gemm(std::int64_t m, std::int64_t n, std::int64_t k) {
  KernelOp op;
  op.m = m, op.n = n, op.k = k;
  op.forward_flops = 2.0 * double(m) * double(n) * double(k);
  return op;
}

// The harness's sweep shape: squares and Llama-like rectangles from 256 to 16384.
std::vector<std::array<std::int64_t, 3>> sweep_shapes() {
  std::vector<std::array<std::int64_t, 3>> out;
  const std::int64_t dims[] = {256, 512, 1024, 2048, 3072, 4096, 8192, 14336};
  for (std::int64_t a : dims)
    for (std::int64_t b : {std::int64_t{1024}, std::int64_t{4096}, std::int64_t{16384}})
      out.push_back({a, b, 4096}), out.push_back({4096, a, b});
  return out;
}

}  // namespace

TEST_CASE("topologies::KernelFit: recovers altered GEMM, bandwidth and overhead parameters") {
  const GpuSpec gpu = find_gpu("h100-sxm");
  GpuEfficiency truth;
  truth.matmul_peak_fraction = 0.66;  // the default H100 bf16 fraction is higher
  truth.matmul_half_dim = 260;
  truth.memory_bandwidth_fraction = 0.71;
  truth.kernel_overhead_s = 2.6e-6;
  const DatasheetKernelModel truth_model(gpu, truth);
  KernelSamples fit_samples;
  std::vector<GemmSample> held_out;
  const auto shapes = sweep_shapes();
  for (size_t i = 0; i < shapes.size(); ++i) {
    const auto [m, n, k] = shapes[i];
    GemmSample s{DType::BF16, m,
                 n,           k,
                 1,           truth_model.seconds(gemm(m, n, k), KernelPass::FORWARD, DType::BF16),
                 0.02,        ""};
    // Every fourth shape is left out of the fit and predicted afterwards.
    (i % 4 == 3 ? held_out : fit_samples.gemms).push_back(s);
  }
  for (double bytes = 4096; bytes <= 4e9; bytes *= 4) {
    KernelOp op;
    op.kind = KernelKind::MEMORY_BOUND;
    op.bytes = bytes;
    fit_samples.memory.push_back(
        {bytes, truth_model.seconds(op, KernelPass::FORWARD, DType::BF16), 0.02, ""});
  }
  const KernelFit fit = fit_kernels(gpu, {}, fit_samples);
  const auto value = [&](const std::string& name) {
    for (const FittedParameter& p : fit.parameters)
      if (p.name == name) return p.value;
    FAIL("no parameter " << name);
    return 0.0;
  };
  CHECK(value("gemm_fraction bf16") == doctest::Approx(0.66).epsilon(0.02));
  CHECK(value("matmul_half_dim bf16") == doctest::Approx(260).epsilon(0.02));
  CHECK(value("memory_bandwidth_fraction") == doctest::Approx(0.71).epsilon(0.02));
  CHECK(value("kernel_overhead_s") == doctest::Approx(2.6e-6).epsilon(0.02));
  CHECK(fit.tile == 128);
  for (const FittedParameter& p : fit.parameters) CHECK(p.status == BoundStatus::FREE);
  // Left-out shapes: the fitted curve, not a neighbour's time, within 3%.
  const FittedKernelModel model(gpu, fit);
  REQUIRE(held_out.size() >= 10);
  for (const GemmSample& s : held_out) {
    const double predicted = model.seconds(gemm(s.m, s.n, s.k), KernelPass::FORWARD, DType::BF16);
    CHECK(predicted == doctest::Approx(s.seconds).epsilon(0.03));
  }
}

TEST_CASE("topologies::KernelFit: bounds hold and a fraction above the datasheet is pinned") {
  const GpuSpec gpu = find_gpu("h100-sxm");
  // GEMMs "measured" at twice the dense peak: impossible; the fraction stops at 1 and says so.
  KernelSamples s;
  for (std::int64_t d : {4096, 8192, 16384}) {
    const double flops = 2.0 * double(d) * d * d;
    s.gemms.push_back({DType::BF16, d, d, d, 1, flops / (2 * gpu.bf16_flops), 0.02, ""});
  }
  const KernelFit fit = fit_kernels(gpu, {}, s);
  REQUIRE(!fit.parameters.empty());
  CHECK(fit.parameters[0].name == "gemm_fraction bf16");
  CHECK(fit.parameters[0].value == doctest::Approx(1.0));
  CHECK(fit.parameters[0].status == BoundStatus::AT_UPPER);
}

TEST_CASE("topologies::KernelFit: no samples keep the defaults, a raw shape keeps its time") {
  const GpuSpec gpu = find_gpu("h100-sxm");
  const KernelFit none = fit_kernels(gpu, {}, {});
  CHECK(none.parameters.empty());
  const DatasheetKernelModel datasheet(gpu);
  const FittedKernelModel plain(gpu, none, {{DType::BF16, 1024, 2048, 4096, 123e-6}});
  const KernelOp op = gemm(1024, 2048, 4096);
  CHECK(plain.seconds(op, KernelPass::FORWARD, DType::BF16) == doctest::Approx(123e-6));
  // Its backward passes are other shapes: the model's.
  KernelOp both = op;
  both.backward_input_flops = op.forward_flops;
  CHECK(plain.seconds(both, KernelPass::BACKWARD_INPUT, DType::BF16) ==
        doctest::Approx(datasheet.seconds(both, KernelPass::BACKWARD_INPUT, DType::BF16)));
}

TEST_CASE(
    "topologies::KernelFit: recovers an altered fused-attention fraction and backward ratio") {
  // Forward and backward times of causal flash attention made by loom's own model with an
  // attention fraction and backward ratio unlike the H200's defaults, over the layouts
  // scripts/device-check sweeps; every third layout is left out and predicted.
  const GpuSpec gpu = find_gpu("h200");
  GpuEfficiency truth;
  truth.attention_fraction = 0.41;
  truth.attention_backward_ratio = 0.62;
  const DatasheetKernelModel truth_model(gpu, truth);
  KernelSamples fit_samples;
  std::vector<AttentionSample> held_out;
  int i = 0;
  for (const auto [heads, dim] :
       {std::pair<int, int>{32, 128}, {16, 128}, {8, 128}, {64, 128}, {32, 64}}) {
    for (std::int64_t seq : {1024, 2048, 4096, 8192}) {
      AttentionSample s;
      s.batch = std::max<std::int64_t>(1, 8192 / seq), s.heads = heads, s.seq = seq;
      s.head_dim = dim;
      double forward = 0, backward = 0;
      for (const KernelOp& op : attention_ops(s)) {
        forward += truth_model.seconds(op, KernelPass::FORWARD, DType::BF16);
        backward += truth_model.seconds(op, KernelPass::BACKWARD_INPUT, DType::BF16);
      }
      s.forward_s = forward, s.backward_s = backward;
      (++i % 3 == 0 ? held_out : fit_samples.attention).push_back(s);
    }
  }
  const KernelFit fit = fit_kernels(gpu, GpuEfficiency{}, fit_samples);
  bool fraction = false, ratio = false;
  for (const FittedParameter& p : fit.parameters) {
    CAPTURE(p.name);
    if (p.name == "attention_fraction d128") {
      fraction = true;
      CHECK(p.value == doctest::Approx(0.41).epsilon(0.02));
    }
    if (p.name == "attention_backward_ratio d128") {
      ratio = true;
      CHECK(p.value == doctest::Approx(0.62).epsilon(0.02));
    }
  }
  CHECK(fraction);
  CHECK(ratio);
  const FittedKernelModel fitted(gpu, fit);
  for (const AttentionSample& s : held_out) {
    double forward = 0, backward = 0;
    for (const KernelOp& op : attention_ops(s)) {
      forward += fitted.seconds(op, KernelPass::FORWARD, DType::BF16);
      backward += fitted.seconds(op, KernelPass::BACKWARD_INPUT, DType::BF16);
    }
    CAPTURE(s.seq);
    CHECK(forward == doctest::Approx(s.forward_s).epsilon(0.03));
    CHECK(backward == doctest::Approx(*s.backward_s).epsilon(0.03));
  }
}
