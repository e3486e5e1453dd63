// Pass costing (strategies/step/pass_cost): the seconds of each pass and the model-parallel
// collectives of an op list, checked against figures worked out by hand from the H100 SXM
// datasheet (NVIDIA H100 Tensor Core GPU datasheet, SXM5 column: 989.4 TFLOP/s dense bf16,
// 1,978.9 TFLOP/s dense fp8, 494.7 TFLOP/s dense tf32, 3.35 TB/s HBM3; 132 SMs per the H100
// architecture whitepaper) and the kernel model's documented coefficients (docs/simulate.md,
// docs/defaults.md: large-GEMM fraction 0.803 bf16 / 0.709 fp8 on Hopper, matmul_half_dim
// 48, 128 x 128 tiles, memory_bandwidth_fraction 0.80, attention 0.60 on Hopper, causal
// fraction 0.5, 4 us per kernel, FP8 casts 4 B per element under delayed scaling).
#include <doctest/doctest.h>

#include <algorithm>
#include <iterator>
#include <vector>

#include "models/flops.hpp"
#include "models/model_loader.hpp"
#include "strategies/step/pass_cost.hpp"
#include "topologies/cluster_presets.hpp"
#include "topologies/gpu_catalog.hpp"
#include "topologies/kernel_model.hpp"

using namespace loom;
using namespace loom::strategies;
using models::Dim;
using sim::CollectiveOp;

namespace {

// doctest::Approx adds 1 to its scale, so on quantities far below one (seconds of a kernel)
// it compares absolutely; rel() compares relatively (default: to 1e-6).
doctest::Approx rel(double value, double epsilon = 1e-6) {
  return doctest::Approx(value).epsilon(epsilon).scale(0);
}

// H100 at its boost clock (load_clock_fraction 1), so the hand figures below need no clock
// factor, and with a GEMM half-dimension of 48 (the hand figures' shape factors); the
// sustained load clock and the measured per-architecture half-dimensions are tested in
// tests/topologies/test_kernel_model.cpp.
const topo::DatasheetKernelModel& h100() {
  static const topo::DatasheetKernelModel model = [] {
    topo::GpuSpec spec = topo::find_gpu("h100-sxm");
    spec.load_clock_fraction = 1;
    topo::GpuEfficiency e;
    e.matmul_half_dim = 48;
    return topo::DatasheetKernelModel(spec, e);
  }();
  return model;
}

// One 4096 x 4096 x 4096 GEMM (weights: forward, input and weight gradients each 2·4096³
// FLOPs) followed by a norm moving 32 MiB in and 32 MiB out.
std::vector<models::OpCost> gemm_then_norm() {
  models::OpCost gemm;
  gemm.name = "gemm";
  gemm.kind = models::OpKind::MATMUL;
  gemm.shape = {4096, 4096, 4096, 1};
  gemm.fwd_flops = gemm.bwd_input_flops = gemm.bwd_weight_flops = 2.0 * 4096 * 4096 * 4096;
  gemm.params = 4096.0 * 4096;
  gemm.fp8_linear = true;  // a layer linear (Transformer Engine runs it in FP8)
  models::OpCost norm;
  norm.name = "norm";
  norm.kind = models::OpKind::ELEMENTWISE;
  norm.input_bytes = norm.output_bytes = 32.0 * 1024 * 1024;
  norm.params = 8192;
  return {gemm, norm};
}

// By hand: shape efficiency per dimension (4096/4144) / (8192/8240) = 0.994208, cubed
// 0.982722; waves: 32 x 32 = 1024 tiles on 132 SMs = 8 waves, 1024/1056 = 0.969697 busy;
// efficiency 0.803 x 0.982722 x 0.969697 = 0.765213 (bf16, tf32), 0.709 x 0.982722 x
// 0.969697 = 0.675636 (fp8). 2·4096³ = 1.37439e11 FLOPs.
constexpr double GEMM_EFFICIENCY = 0.765213;
constexpr double GEMM_BF16_S = 185.533e-6;  // 1.37439e11 / (989.4e12 x 0.765213) + 4 us
constexpr double GEMM_FP8_S = 106.795e-6;   // 1.37439e11 / (1978.9e12 x 0.675636) + 4 us
constexpr double GEMM_TF32_S = 367.066e-6;  // 1.37439e11 / (494.7e12 x 0.765213) + 4 us
// One FP8 cast of a 4096 x 4096 operand: 4 B per element (read bf16, write FP8 and its
// transpose) = 67,108,864 B / (3.35e12 x 0.80) + 4 us = 29.0406 us. Forward casts the input
// and the weight, backward the output gradient.
constexpr double CAST_S = 29.0406e-6;
// 64 MiB / (3.35e12 x 0.80) + 4 us forward; the backward moves twice the bytes.
constexpr double NORM_FWD_S = 29.0406e-6;
constexpr double NORM_BWD_S = 54.0812e-6;
// The norm's 8192 parameters accumulate into the fp32 main gradient each micro-batch
// (Megatron DDP hook main_grad.add_(grad): read 4 + read 2 + write 4 B): 81,920 B /
// 2.68e12 B/s + 4 us. The GEMM's is fused into its wgrad GEMM (gradient-accumulation fusion).
constexpr double NORM_ACCUM_S = 4.030567e-6;

models::TrainingPlan plan_with(int tp, bool sp = false) {
  models::TrainingPlan p;
  p.tp = tp;
  p.sp = sp;
  p.seq = 2048;
  p.mbs = 1;
  return p;
}

// The collectives of `items` on `dim` with `op`.
std::vector<CommItem> only(const std::vector<CommItem>& items, Dim dim, CollectiveOp op) {
  std::vector<CommItem> out;
  std::copy_if(items.begin(), items.end(), std::back_inserter(out),
               [&](const CommItem& c) { return c.dim == dim && c.op == op; });
  return out;
}

double total_bytes(const std::vector<CommItem>& items) {
  double s = 0;
  for (const auto& c : items) s += c.bytes;
  return s;
}

}  // namespace

TEST_CASE("strategies::PassCost: a GEMM and a norm on H100 bf16, by hand") {
  CHECK(h100().matmul_efficiency(4096, 4096, 4096) == rel(GEMM_EFFICIENCY, 1e-5));
  const PassCost c = cost_ops(gemm_then_norm(), plan_with(1), h100());
  // The square GEMM's backward shapes (dA: m,k,n; dB: k,n,m) are the forward's.
  CHECK(c.fwd_s == rel(GEMM_BF16_S + NORM_FWD_S, 1e-5));
  CHECK(c.bwd_input_s == rel(GEMM_BF16_S + NORM_BWD_S, 1e-5));
  CHECK(c.bwd_weight_s == rel(GEMM_BF16_S + NORM_ACCUM_S, 1e-5));  // + the norm's grad add
  CHECK(c.recompute_s == 0);
  CHECK(c.params == 4096.0 * 4096 + 8192);
  CHECK(c.fwd_comm.empty());
  CHECK(c.bwd_comm.empty());
}

TEST_CASE("strategies::PassCost: fp8 runs GEMMs at the fp8 peak, fp32 on TF32, not the norm") {
  auto fp8 = plan_with(1);
  fp8.precision = models::Precision::FP8;
  auto fp32 = plan_with(1);
  fp32.precision = models::Precision::FP32;
  const PassCost c8 = cost_ops(gemm_then_norm(), fp8, h100());
  const PassCost c32 = cost_ops(gemm_then_norm(), fp32, h100());
  CHECK(c8.fwd_s == rel(GEMM_FP8_S + 2 * CAST_S + NORM_FWD_S, 1e-5));
  CHECK(c8.bwd_input_s == rel(GEMM_FP8_S + CAST_S + NORM_BWD_S, 1e-5));
  CHECK(c8.bwd_weight_s == rel(GEMM_FP8_S + NORM_ACCUM_S, 1e-5));
  CHECK(c32.fwd_s == rel(GEMM_TF32_S + NORM_FWD_S, 1e-5));
  CHECK(compute_dtype(models::Precision::FP8) == topo::DType::FP8);
  CHECK(h100().peak_flops(compute_dtype(models::Precision::FP32)) == rel(494.7e12));
}

TEST_CASE("strategies::PassCost: the plan's FP8 recipe sets the casts, by hand") {
  // Tensorwise (current) scaling reads each operand once more for its amax: 6 B per element
  // instead of delayed scaling's 4, so each 4096 x 4096 cast takes 1.5x the bytes:
  // 100,663,296 B / 2.68e12 B/s + 4 us = 41.5609 us. The GEMM is the same.
  auto fp8 = plan_with(1);
  fp8.precision = models::Precision::FP8;
  fp8.fp8_recipe = Fp8Recipe::TENSORWISE;
  constexpr double CAST_TENSORWISE_S = 41.5609e-6;
  const PassCost c = cost_ops(gemm_then_norm(), fp8, h100());
  CHECK(c.fwd_s == rel(GEMM_FP8_S + 2 * CAST_TENSORWISE_S + NORM_FWD_S, 1e-5));
  CHECK(c.bwd_input_s == rel(GEMM_FP8_S + CAST_TENSORWISE_S + NORM_BWD_S, 1e-5));
  // Unset, the GPU's recipe: delayed on Hopper (CAST_S), as an explicit delayed.
  fp8.fp8_recipe.reset();
  const PassCost by_gpu = cost_ops(gemm_then_norm(), fp8, h100());
  fp8.fp8_recipe = Fp8Recipe::DELAYED;
  CHECK(cost_ops(gemm_then_norm(), fp8, h100()).fwd_s == by_gpu.fwd_s);
  CHECK(by_gpu.fwd_s == rel(GEMM_FP8_S + 2 * CAST_S + NORM_FWD_S, 1e-5));
  // The swizzle switch changes nothing without block scales.
  fp8.scale_swizzle = true;
  CHECK(cost_ops(gemm_then_norm(), fp8, h100()).fwd_s == by_gpu.fwd_s);
}

TEST_CASE("strategies::PassCost: block-scale swizzles reach the launches and the time") {
  // NVFP4 on B200 with --scale-swizzle: the GEMM's cast op adds 2 swizzle kernels forward and
  // 4 backward (one per operand of each GEMM), each a launch and a memory-bound kernel of its
  // scales (2/16 B per element with its 4 us overhead): forward 2 x (4096² x 0.125 / 6.4e12
  // + 4e-6) = 18.49 us; backward twice that.
  const topo::DatasheetKernelModel b200(topo::find_gpu("b200"));
  auto fp4 = plan_with(1);
  fp4.precision = models::Precision::NVFP4;
  const PassCost plain = cost_ops(gemm_then_norm(), fp4, b200);
  fp4.scale_swizzle = true;
  const PassCost swizzled = cost_ops(gemm_then_norm(), fp4, b200);
  CHECK(swizzled.fwd_launches == plain.fwd_launches + 2);
  CHECK(swizzled.bwd_launches == plain.bwd_launches + 4);
  const double one =
      4096.0 * 4096 * 2 / 16 / (topo::find_gpu("b200").hbm_bandwidth_Bps * 0.80) + 4e-6;
  CHECK(swizzled.fwd_s - plain.fwd_s == rel(2 * one, 1e-9));
  CHECK(swizzled.bwd_input_s - plain.bwd_input_s == rel(4 * one, 1e-9));
  CHECK(swizzled.bwd_weight_s == plain.bwd_weight_s);
}

TEST_CASE("strategies::PassCost: fp8 speeds a layer by its linear-GEMM share only") {
  // gpt-1.7b layer (Narayanan 2021 Table 1: h 2304, 24 heads), H100 SXM, delayed scaling.
  // Transformer Engine runs only the layer's linears in FP8: their compute time (less the
  // 4 us per kernel) scales by (989.4 x 0.803) / (1978.9 x 0.709) = 0.566262 (datasheet
  // peaks x large-GEMM fractions; both GEMMs have the same shape efficiency) and each pays
  // its casts: forward input (m x k) and weight (k x n), backward output gradient (m x n),
  // 4 B per element at 0.80 x 3.35 TB/s plus 4 us per cast kernel. Attention and
  // memory-bound ops keep their bf16 time. So the layer's forward speedup is
  //   T16 / (T16 - G + (G - 4 us x n) x 0.566245 + 4 us x n + casts)
  // with G the bf16 time of its n linears: the ratio its GEMM share predicts.
  const auto model = models::load_model("gpt-1.7b");
  auto bf16 = plan_with(1);
  auto fp8 = bf16;
  fp8.precision = models::Precision::FP8;
  const auto ops = models::layer_ops(model, bf16, 0);
  std::vector<models::OpCost> linears;
  std::copy_if(ops.begin(), ops.end(), std::back_inserter(linears),
               [](const models::OpCost& op) { return op.fp8_linear; });
  REQUIRE(linears.size() == 4);  // qkv, out proj, MLP up, MLP down
  const double n = 4, hbm = 0.80 * 3.35e12;
  double cast_fwd = 0, cast_bwd = 0;
  for (const auto& op : linears) {
    const double m = double(op.shape.m), nn = double(op.shape.n), k = double(op.shape.k);
    cast_fwd += 4 * m * k / hbm + 4 * k * nn / hbm + 2 * 4e-6;
    cast_bwd += 4 * m * nn / hbm + 4e-6;
  }
  const PassCost layer16 = cost_ops(ops, bf16, h100());
  const PassCost layer8 = cost_ops(models::layer_ops(model, fp8, 0), fp8, h100());
  const double g = cost_ops(linears, bf16, h100()).fwd_s;
  const double ratio = (989.4 * 0.803) / (1978.9 * 0.709);
  CHECK(ratio == doctest::Approx(0.566262).epsilon(1e-6));
  const double predicted =
      layer16.fwd_s / (layer16.fwd_s - g + (g - 4e-6 * n) * ratio + 4e-6 * n + cast_fwd);
  CHECK(layer16.fwd_s / layer8.fwd_s == rel(predicted, 1e-9));
  // Backward: both GEMMs of each linear scale alike; the output-gradient cast lands in dX.
  const PassCost g16 = cost_ops(linears, bf16, h100());
  const double bwd16 = layer16.bwd_input_s + layer16.bwd_weight_s;
  const double gb = g16.bwd_input_s + g16.bwd_weight_s;
  const double bwd8 = bwd16 - gb + (gb - 2 * 4e-6 * n) * ratio + 2 * 4e-6 * n + cast_bwd;
  CHECK(layer8.bwd_input_s + layer8.bwd_weight_s == rel(bwd8, 1e-9));
  // The speedup stays far below the 2x peak ratio (published recipes: 1.15-1.45x on large
  // models). This small layer (2048 tokens, h 2304, one micro-batch per step) gains little:
  // casting its weights costs about what the FP8 GEMMs save.
  CHECK(layer16.fwd_s / layer8.fwd_s < 1.6);
  // Over 8 micro-batches Transformer Engine casts each weight once (is_first_microbatch,
  // which Megatron-core sets) and reuses it: each micro-batch pays 1/8 of the weight casts
  // (bytes and launch), the input casts in full; without the cache every micro-batch pays
  // them all.
  auto fp8_m8 = fp8;
  fp8_m8.gbs = 8;
  REQUIRE(fp8_m8.micro_batches() == 8);
  double weight_casts = 0;
  for (const auto& op : linears)
    weight_casts += 4 * double(op.shape.k) * double(op.shape.n) / hbm + 4e-6;
  const PassCost cached = cost_ops(models::layer_ops(model, fp8_m8, 0), fp8_m8, h100());
  CHECK(cached.fwd_s == rel(layer8.fwd_s - weight_casts * (1 - 1.0 / 8), 1e-9));
  CHECK(cached.bwd_input_s == rel(layer8.bwd_input_s, 1e-12));  // the dY casts stay
  fp8_m8.fp8_weight_cache = false;
  CHECK(cost_ops(models::layer_ops(model, fp8_m8, 0), fp8_m8, h100()).fwd_s ==
        rel(layer8.fwd_s, 1e-12));
  // The LM head stays bf16: the same time in both precisions.
  CHECK(cost_ops(models::head_ops(model, fp8), fp8, h100(), OpList::HEAD).fwd_s ==
        rel(cost_ops(models::head_ops(model, bf16), bf16, h100(), OpList::HEAD).fwd_s));
}

TEST_CASE("strategies::PassCost: --first-last-layers-bf16 runs its layers as bf16 ones") {
  // gpt-1.7b has 24 layers. Megatron-core's is_first_last_bf16_layer (fp8_utils.py; fp4_utils
  // alike) keeps the first num_layers_at_start_in_bf16 and the last num_layers_at_end_in_bf16
  // by global layer number: with 1 and 2, layers 0, 22 and 23.
  const auto model = models::load_model("gpt-1.7b");
  auto bf16 = plan_with(1);
  auto fp8 = bf16;
  fp8.precision = models::Precision::FP8;
  fp8.first_last_layers_bf16 = true;
  fp8.num_layers_at_end_in_bf16 = 2;
  std::vector<int> kept;
  for (int l = 0; l < model.layers; ++l)
    if (models::layer_in_bf16(model, fp8, l)) kept.push_back(l);
  CHECK(kept == std::vector<int>{0, 22, 23});
  // A kept layer costs what the layer costs under --precision bf16 (no casts, bf16 weights
  // and GEMMs) and keeps its linears' 16-bit inputs; the others stay fp8.
  const PassCost b = cost_ops(models::layer_ops(model, bf16, 0), bf16, h100());
  const PassCost k = cost_ops(models::layer_ops(model, fp8, 23), fp8, h100());
  CHECK(k.fwd_s == rel(b.fwd_s, 1e-12));
  CHECK(k.bwd_input_s + k.bwd_weight_s == rel(b.bwd_input_s + b.bwd_weight_s, 1e-12));
  CHECK(k.fwd_launches == b.fwd_launches);
  const auto saved = [](const std::vector<models::OpCost>& ops) {
    double sum = 0;
    for (const auto& op : ops) sum += op.saved_bytes;
    return sum;
  };
  CHECK(saved(models::layer_ops(model, fp8, 0)) == rel(saved(models::layer_ops(model, bf16, 0))));
  auto plain = fp8;
  plain.first_last_layers_bf16 = false;  // without the switch no layer is kept
  CHECK_FALSE(models::layer_in_bf16(model, plain, 0));
  const PassCost q = cost_ops(models::layer_ops(model, fp8, 1), fp8, h100());
  const PassCost f = cost_ops(models::layer_ops(model, plain, 1), plain, h100());
  CHECK(q.fwd_s == rel(f.fwd_s, 1e-12));
  CHECK(q.fwd_s != rel(b.fwd_s, 1e-3));  // casts and fp8 GEMMs
  CHECK(saved(models::layer_ops(model, fp8, 1)) < saved(models::layer_ops(model, bf16, 1)));
  // Under bf16 nothing is quantised: no layer is kept.
  bf16.first_last_layers_bf16 = true;
  CHECK_FALSE(models::layer_in_bf16(model, bf16, 0));
}

TEST_CASE("strategies::PassCost: kept MoE layers and MTP modules cost as bf16 ones") {
  // DeepSeek-V3 (61 layers, the first 3 dense, one MTP depth built like the last layer), fp8,
  // ep 64: with --first-last-layers-bf16 the last layer is an MoE layer kept in bf16. Its
  // routed-expert block sets up no weight quantisers (the host time of a bf16 block), and its
  // passes are the bf16 layer's.
  const auto model = models::load_model("deepseek-v3");
  auto bf16 = plan_with(1);
  bf16.ep = 64;  // 4 local experts: the block's host time is more than its launches'
  bf16.dp = 64;
  auto fp8 = bf16;
  fp8.precision = models::Precision::FP8;
  fp8.first_last_layers_bf16 = true;
  const int last = model.layers - 1;
  REQUIRE(model.is_moe_layer(last));
  REQUIRE(models::layer_in_bf16(model, fp8, last));
  const PassCost b = cost_ops(models::layer_ops(model, bf16, last), bf16, h100());
  const PassCost k = cost_ops(models::layer_ops(model, fp8, last), fp8, h100());
  CHECK(k.fwd_host_s == rel(b.fwd_host_s, 1e-12));
  CHECK(k.fwd_s == rel(b.fwd_s, 1e-12));
  const PassCost q = cost_ops(models::layer_ops(model, fp8, last - 1), fp8, h100());
  // A quantised layer costs the host more (its casts' launches, its block's quantisers).
  const auto host = [](const PassCost& c) {
    return c.fwd_launches * GRACE_HOST_OP_S + c.fwd_host_s;
  };
  CHECK(host(q) > host(k));
  // The MTP depth runs under the global context: quantised though the last layer is kept,
  // unquantised (every linear, eh_proj too) with --keep-mtp-in-bf16.
  const auto mtp_linears = [&](const models::TrainingPlan& plan) {
    int quantised = 0, all = 0;
    for (const auto& op : models::head_ops(model, plan)) {
      if (op.name.rfind("mtp_", 0) != 0 || op.kind != models::OpKind::MATMUL) continue;
      ++all;
      quantised += op.fp8_linear ? 1 : 0;
    }
    return std::make_pair(quantised, all);
  };
  const auto [quantised, all] = mtp_linears(fp8);
  CHECK(all > 4);
  CHECK(quantised == all - 2);  // all but the router and the shared LM head
  fp8.keep_mtp_in_bf16 = true;
  CHECK(mtp_linears(fp8).first == 0);
}

TEST_CASE("strategies::PassCost: unfused frameworks add every parameter's gradient, by hand") {
  // Without Megatron's gradient-accumulation fusion (torch.compile or eager), the GEMM's
  // 4096 x 4096 weight gradient is added to the fp32 main gradient by its own kernel:
  // 16,777,216 x 10 B = 167,772,160 B / 2.68e12 B/s + 4 us = 66.6016 us; bf16 accumulation
  // moves 6 B per parameter: 41.5610 us.
  auto p = plan_with(1);
  p.fusion = models::Fusion::COMPILE;
  const PassCost c = cost_ops(gemm_then_norm(), p, h100());
  CHECK(c.bwd_weight_s == rel(GEMM_BF16_S + 66.6016e-6 + NORM_ACCUM_S, 1e-5));
  CHECK(c.fwd_s == rel(GEMM_BF16_S + NORM_FWD_S, 1e-5));  // the forward is unchanged
  p.grad_dtype = models::GradDtype::BF16;
  CHECK(cost_ops(gemm_then_norm(), p, h100()).bwd_weight_s ==
        rel(GEMM_BF16_S + 41.5610e-6 + 4.018340e-6, 1e-5));
}

TEST_CASE("strategies::PassCost: CUDA graphs save the launch gap in layers only") {
  // Gray 2019 (NVIDIA blog): 0.4 us per kernel launched from a graph. The GEMM and the norm
  // launch one kernel per pass: forward and input gradient save 2 x 0.4 us, the weight
  // gradient (GEMM + the norm's gradient add) 2 x 0.4 us.
  auto p = plan_with(1);
  p.cuda_graphs = true;
  const PassCost eager = cost_ops(gemm_then_norm(), plan_with(1), h100());
  const PassCost graphed = cost_ops(gemm_then_norm(), p, h100());
  CHECK(eager.fwd_s - graphed.fwd_s == rel(0.8e-6, 1e-6));
  CHECK(eager.bwd_input_s - graphed.bwd_input_s == rel(0.8e-6, 1e-6));
  CHECK(eager.bwd_weight_s - graphed.bwd_weight_s == rel(0.8e-6, 1e-6));
  // Megatron captures transformer layers only: the head launches eagerly.
  CHECK(cost_ops(gemm_then_norm(), p, h100(), OpList::HEAD).fwd_s == rel(eager.fwd_s));
}

TEST_CASE("strategies::PassCost: a partial CUDA-graph scope captures only its modules' ops") {
  // Qwen3-30B-A3B (48 layers, 128 experts, top 8) at ep 8 in bf16: an MoE layer's ops are the
  // attention block (attn scope), the pre-MLP norm, router, router top-k (moe_router), the
  // dispatcher's preprocessing (moe_preprocess), then the eager dispatch, routed experts,
  // combine and residual add.
  const auto model = models::load_model("qwen3-30b-a3b");
  models::TrainingPlan p;
  p.seq = 4096;
  p.dp = p.ep = 8;
  const auto ops = models::layer_ops(model, p, 0);
  const auto module = [&](const char* name) {
    return std::find_if(ops.begin(), ops.end(),
                        [&](const models::OpCost& op) { return op.name == name; })
        ->graph_module;
  };
  CHECK(module("qkv_proj") == models::GraphModule::ATTN);
  CHECK(module("attn_residual") == models::GraphModule::ATTN);
  CHECK(module("mlp_norm") == models::GraphModule::MOE_ROUTER);
  CHECK(module("router_topk") == models::GraphModule::MOE_ROUTER);
  CHECK(module("moe_preprocess") == models::GraphModule::MOE_PREPROCESS);
  CHECK_FALSE(module("expert_up").has_value());
  CHECK_FALSE(module("mlp_residual").has_value());
  // With attn, moe_router and moe_preprocess captured, the layer launches one graph per pass
  // (Megatron captures a layer's scopes in one graph: transformer_layer.py
  // _te_cuda_graph_capture) plus every eager op's kernels: the eager layer's launches less
  // the captured ops' own (each op costed alone: its launches do not depend on the others).
  const PassCost eager = cost_ops(ops, p, h100());
  models::TrainingPlan partial = p;
  partial.cuda_graphs = true;
  partial.cuda_graph_scope = models::graph_bit(models::GraphModule::ATTN) |
                             models::graph_bit(models::GraphModule::MOE_ROUTER) |
                             models::graph_bit(models::GraphModule::MOE_PREPROCESS);
  double captured_fwd = 0, captured_bwd = 0;
  for (const auto& op : ops) {
    if (!op.graph_module) continue;
    const PassCost one = cost_ops({op}, p, h100());
    captured_fwd += one.fwd_launches;
    captured_bwd += one.bwd_launches;
  }
  const PassCost graphed = cost_ops(ops, partial, h100());
  CHECK(graphed.fwd_launches == rel(eager.fwd_launches - captured_fwd + 1));
  CHECK(graphed.bwd_launches == rel(eager.bwd_launches - captured_bwd + 1));
  // The routed experts stay eager: their block's host time stays.
  REQUIRE(eager.fwd_host_s != 0);
  CHECK(graphed.fwd_host_s == rel(eager.fwd_host_s));
  // The captured ops save the graph launch gap on the GPU; the pass is still bounded by the
  // eager part's host time, unlike a whole-layer graph, which never is.
  CHECK(graphed.fwd_s < eager.fwd_s);
  models::TrainingPlan whole = p;
  whole.cuda_graphs = true;
  models::TrainingPlan short_seq = partial;
  short_seq.seq = 128;
  const auto short_ops = models::layer_ops(model, short_seq, 0);
  const PassCost bound = cost_ops(short_ops, short_seq, h100(), OpList::LAYER, 10e-6);
  // At 10 us per launch: the eager launches, and the expert block scaled from the GB200's speed.
  const auto host_at_10us = [](const PassCost& c) {
    return c.fwd_launches * 10e-6 + c.fwd_host_s * (10e-6 / GRACE_HOST_OP_S);
  };
  CHECK(bound.fwd_s == rel(host_at_10us(bound)));
  // The full scope on an MoE layer captures everything but the dynamic dispatch, routed
  // experts and combine: one graph launch plus theirs, still bounded by their host time.
  models::TrainingPlan whole_short = whole;
  whole_short.seq = 128;
  const PassCost full_moe = cost_ops(short_ops, whole_short, h100(), OpList::LAYER, 10e-6);
  CHECK(full_moe.fwd_s < bound.fwd_s);
  CHECK(full_moe.fwd_s == rel(host_at_10us(full_moe)));
  // dispatch, the probabilities' all-to-all, sort by expert, up, activation, down, unsort,
  // combine.
  CHECK(std::count_if(ops.begin(), ops.end(),
                      [](const models::OpCost& op) { return op.dynamic_shape; }) == 8);
  // A dense layer under the full scope is one graph, never host-bound, its launches counted
  // as eager ones (single-process DataParallel's host tasks read them).
  const auto dense = models::layer_ops(models::load_model("llama3-8b"), p, 0);
  CHECK(cost_ops(dense, whole, h100()).fwd_launches ==
        rel(cost_ops(dense, p, h100()).fwd_launches));
  // A dense layer's MLP block is the mlp scope.
  CHECK(std::all_of(dense.begin(), dense.end(), [](const models::OpCost& op) {
    return op.graph_module == models::GraphModule::ATTN ||
           op.graph_module == models::GraphModule::MLP;
  }));
}

TEST_CASE("strategies::PassCost: a pass takes at least its kernel launches' host time") {
  // gemm_then_norm launches, by hand: forward GEMM + norm = 2; backward dgrad + wgrad GEMMs,
  // the norm's backward and its gradient-accumulation add (the GEMM's is fused) = 4.
  const PassCost gpu_bound = cost_ops(gemm_then_norm(), plan_with(1), h100());
  CHECK(gpu_bound.fwd_launches == 2);
  CHECK(gpu_bound.bwd_launches == 4);
  // At 10 us per launch the host issues 2 kernels in 20 us, well inside the GPU's 215 us:
  // the pass keeps its GPU time.
  const PassCost at_10us = cost_ops(gemm_then_norm(), plan_with(1), h100(), OpList::LAYER, 10e-6);
  CHECK(at_10us.fwd_s == rel(gpu_bound.fwd_s));
  CHECK(at_10us.bwd_input_s == rel(gpu_bound.bwd_input_s));
  // At 1 ms per launch the host is the bottleneck: forward 2 ms, backward 4 ms, the backward's
  // parts stretched alike (their ratio kept).
  const PassCost slow = cost_ops(gemm_then_norm(), plan_with(1), h100(), OpList::LAYER, 1e-3);
  CHECK(slow.fwd_s == rel(2e-3));
  CHECK(slow.bwd_input_s + slow.bwd_weight_s == rel(4e-3));
  CHECK(slow.bwd_input_s / slow.bwd_weight_s ==
        rel(gpu_bound.bwd_input_s / gpu_bound.bwd_weight_s));
  // A CUDA-graphed layer is one graph launch per pass: never host-bound; the head, launched
  // eagerly, is.
  auto graphs = plan_with(1);
  graphs.cuda_graphs = true;
  CHECK(cost_ops(gemm_then_norm(), graphs, h100(), OpList::LAYER, 1e-3).fwd_s < 1e-3);
  CHECK(cost_ops(gemm_then_norm(), graphs, h100(), OpList::HEAD, 1e-3).fwd_s == rel(2e-3));
  // DataParallel simulates its launches as host tasks: no second bound.
  auto dataparallel = plan_with(1);
  dataparallel.dp_mode = models::DpMode::DATAPARALLEL;
  CHECK(pass_host_launch_s(dataparallel, 10e-6) == 0);
  CHECK(pass_host_launch_s(plan_with(1), 10e-6) == 10e-6);
}

TEST_CASE("strategies::PassCost: FP8 casts and grouped GEMMs count their launches") {
  // FP8: the forward adds the input cast and the weight cast, the latter 1 / m of the passes
  // with the weight cache (m = 8 micro-batches); the backward the output-gradient cast.
  auto fp8 = plan_with(1);
  fp8.precision = models::Precision::FP8;
  fp8.gbs = 8;  // 8 micro-batches of mbs 1 on one replica
  const PassCost c = cost_ops(gemm_then_norm(), fp8, h100());
  CHECK(fp8.micro_batches() == 8);
  CHECK(c.fwd_launches == rel(2 + 1 + 1.0 / 8));
  CHECK(c.bwd_launches == rel(4 + 1));
  // 16 experts' GEMMs launched one by one (TE GroupedLinear): 16 per pass.
  topo::KernelOp grouped;
  grouped.kind = topo::KernelKind::GEMM;
  grouped.m = grouped.n = grouped.k = 512;
  grouped.batch = 16;
  grouped.per_group_kernels = true;
  grouped.forward_flops = grouped.backward_input_flops = grouped.backward_weight_flops = 1e9;
  CHECK(topo::kernel_launches(grouped, topo::KernelPass::FORWARD, topo::DType::BF16) == 16);
  CHECK(topo::kernel_launches(grouped, topo::KernelPass::BACKWARD_WEIGHT, topo::DType::BF16) == 16);
  grouped.backward_weight_flops = 0;  // no weights: no weight-gradient kernels
  CHECK(topo::kernel_launches(grouped, topo::KernelPass::BACKWARD_WEIGHT, topo::DType::BF16) == 0);
}

TEST_CASE("strategies::PassCost: full recompute replays layers, not the embedding or head") {
  // Megatron --recompute-granularity full checkpoints the transformer layers only
  // (megatron/core/transformer/transformer_block.py, _checkpointed_forward): a layer
  // replays its whole forward and its forward collectives; the head and embedding none.
  const auto model = models::load_model("gpt-1.7b");
  auto p = plan_with(2);
  p.recompute = models::Recompute::FULL;
  const PassCost layer = cost_ops(models::layer_ops(model, p, 0), p, h100());
  CHECK(layer.recompute_s == rel(layer.fwd_s));
  CHECK(layer.recompute_comm.size() == layer.fwd_comm.size());
  CHECK(!layer.recompute_comm.empty());
  const PassCost head = cost_ops(models::head_ops(model, p), p, h100(), OpList::HEAD);
  CHECK(head.fwd_s > 0);
  CHECK(head.recompute_s == 0);
  CHECK(head.recompute_comm.empty());
  const PassCost emb = cost_ops(models::embedding_ops(model, p), p, h100(), OpList::EMBEDDING);
  CHECK(emb.recompute_s == 0);
}

TEST_CASE("strategies::PassCost: TP all-reduces twice per layer forward and backward") {
  // Megatron tensor parallelism (Shoeybi et al. 2019, Sec. 3, Fig. 4): one all-reduce after
  // the row-parallel attention output projection and one after the MLP down projection in
  // forward (operator g), two mirrored ones in backward (operator f), each on the full
  // b x s x h activation: 2 bytes x 2048 x 2304 = 9,437,184 bytes for gpt-1.7b in bf16.
  const auto model = models::load_model("gpt-1.7b");
  const double activation = 2.0 * 2048 * 2304;
  const PassCost layer = cost_ops(models::layer_ops(model, plan_with(2), 0), plan_with(2), h100());
  REQUIRE(layer.fwd_comm.size() == 2);
  REQUIRE(layer.bwd_comm.size() == 2);
  for (const auto& items : {layer.fwd_comm, layer.bwd_comm}) {
    for (const CommItem& c : items) {
      CHECK(c.dim == Dim::TP);
      CHECK(c.op == CollectiveOp::ALL_REDUCE);
      CHECK(c.bytes == activation);
    }
  }
  // Without TP there is nothing to reduce.
  const PassCost solo = cost_ops(models::layer_ops(model, plan_with(1), 0), plan_with(1), h100());
  CHECK(solo.fwd_comm.empty());
  CHECK(solo.bwd_comm.empty());

  // The whole model on one stage: 24 layers x 2, the vocabulary-parallel embedding's
  // all-reduce of the same activation, and the vocab-parallel cross-entropy's 3 fp32 values
  // per token (max, sum of exponentials, target logit: 12 x 2048 bytes).
  const StageWork work = cost_stages(model, plan_with(2), h100());
  REQUIRE(work.chunk_cost.size() == 1);
  REQUIRE(work.units[0].size() == 26);  // emb, L0..L23, head
  CHECK(work.units[0].front().name == "emb");
  CHECK(work.units[0].back().name == "head");
  const auto& fwd = work.chunk_cost[0].fwd_comm;
  CHECK(fwd.size() == 50);
  CHECK(std::count_if(fwd.begin(), fwd.end(),
                      [&](const CommItem& c) { return c.bytes == activation; }) == 49);
  CHECK(fwd.back().bytes == 12.0 * 2048);
}

TEST_CASE("strategies::PassCost: SP turns each all-reduce into all-gather + reduce-scatter") {
  // Korthikanti et al. 2022, Sec. 4.2.2: with sequence parallelism the forward g/ḡ pair is an
  // all-gather before the column-parallel block and a reduce-scatter after the row-parallel
  // one, of the same full activation; backward swaps them. Same bytes per collective.
  const auto model = models::load_model("gpt-1.7b");
  const double activation = 2.0 * 2048 * 2304;
  const auto plan = plan_with(2, true);
  const PassCost layer = cost_ops(models::layer_ops(model, plan, 0), plan, h100());
  REQUIRE(layer.fwd_comm.size() == 4);
  const std::vector<CollectiveOp> fwd_order = {
      CollectiveOp::ALL_GATHER, CollectiveOp::REDUCE_SCATTER, CollectiveOp::ALL_GATHER,
      CollectiveOp::REDUCE_SCATTER};
  for (size_t i = 0; i < 4; ++i) {
    CHECK(layer.fwd_comm[i].op == fwd_order[i]);
    CHECK(layer.fwd_comm[i].dim == Dim::TP);
    CHECK(layer.fwd_comm[i].bytes == activation);
    CHECK(layer.bwd_comm[i].op == (fwd_order[i] == CollectiveOp::ALL_GATHER
                                       ? CollectiveOp::REDUCE_SCATTER
                                       : CollectiveOp::ALL_GATHER));
    CHECK(layer.bwd_comm[i].bytes == activation);
  }
  CHECK(only(layer.fwd_comm, Dim::TP, CollectiveOp::ALL_REDUCE).empty());
  // SP shards the norms and dropouts by tp: less memory-bound forward time than without SP.
  const PassCost plain = cost_ops(models::layer_ops(model, plan_with(2), 0), plan_with(2), h100());
  CHECK(layer.fwd_s < plain.fwd_s);
  CHECK(total_bytes(layer.fwd_comm) == 2 * total_bytes(plain.fwd_comm));
}

TEST_CASE("strategies::PassCost: CP all-gathers the whole sequence's K/V on the cp group") {
  // Context parallelism (Megatron-core context_parallel; Liu et al. 2023 ring attention):
  // each CP rank holds s/cp tokens and needs K and V of the whole sequence. llama3-8b (Meta
  // config.json: h 4096, 8 KV heads of 128): K + V are 2 x 8 x 128 = 2048 wide; at s = 4096
  // in bf16 the gathered K/V is 2 bytes x 4096 x 2048 = 16,777,216 bytes, i.e. the local
  // shard (s/cp tokens) times cp. Backward reduce-scatters their gradients.
  const auto model = models::load_model("llama3-8b");
  models::TrainingPlan p;
  p.seq = 4096;
  p.cp = 2;
  p.dp = 4;
  const double kv_bytes = 2.0 * 4096 * 2048;
  const PassCost layer = cost_ops(models::layer_ops(model, p, 0), p, h100());
  REQUIRE(layer.fwd_comm.size() == 1);
  CHECK(layer.fwd_comm[0].dim == Dim::CP);
  CHECK(layer.fwd_comm[0].op == CollectiveOp::ALL_GATHER);
  CHECK(layer.fwd_comm[0].bytes == kv_bytes);
  REQUIRE(layer.bwd_comm.size() == 1);
  CHECK(layer.bwd_comm[0].dim == Dim::CP);
  CHECK(layer.bwd_comm[0].op == CollectiveOp::REDUCE_SCATTER);
  CHECK(layer.bwd_comm[0].bytes == kv_bytes);
  // cp = 4: a quarter of the tokens per rank, the same gathered K/V.
  p.cp = 4;
  p.dp = 2;
  const PassCost cp4 = cost_ops(models::layer_ops(model, p, 0), p, h100());
  REQUIRE(cp4.fwd_comm.size() == 1);
  CHECK(cp4.fwd_comm[0].bytes == kv_bytes);
  // With TP as well: K/V split by tp, then the two TP all-reduces of the local tokens'
  // activation (2 bytes x 4096/2 tokens x 4096).
  p.cp = 2;
  p.tp = 2;
  p.dp = 2;
  const PassCost both = cost_ops(models::layer_ops(model, p, 0), p, h100());
  REQUIRE(both.fwd_comm.size() == 3);
  CHECK(both.fwd_comm[0].dim == Dim::CP);
  CHECK(both.fwd_comm[0].bytes == kv_bytes / 2);
  CHECK(only(both.fwd_comm, Dim::TP, CollectiveOp::ALL_REDUCE).size() == 2);
  CHECK(both.fwd_comm[1].bytes == 2.0 * 2048 * 4096);
}

TEST_CASE("strategies::PassCost: EP all-to-alls dispatch and combine in every MoE layer") {
  // Mixtral 8x7B (Jiang et al. 2024: 32 layers, h 4096, 8 experts, top-2, every layer MoE).
  // Each GPU sends its s x top_k token copies out and receives as many back (GShard/
  // Megatron-core all-to-all dispatcher): 2 bytes x 4096 x 2 x 4096 = 67,108,864 bytes per
  // all-to-all at s = 4096, mbs 1, bf16, capacity factor 1.
  const auto model = models::load_model("mixtral-8x7b");
  models::TrainingPlan p;
  p.seq = 4096;
  p.dp = 8;
  p.ep = 8;
  // Between them the routed copies' fp32 probabilities, 4096 x 2 x 4 B, in an all-to-all of
  // their own (Megatron-core token_dispatch: global_probs).
  const double dispatch = 2.0 * 4096 * 2 * 4096;
  const PassCost layer = cost_ops(models::layer_ops(model, p, 0), p, h100());
  REQUIRE(layer.fwd_comm.size() == 3);
  REQUIRE(layer.bwd_comm.size() == 3);
  for (const auto& items : {layer.fwd_comm, layer.bwd_comm}) {
    for (const CommItem& c : items) {
      CHECK(c.dim == Dim::EP);
      CHECK(c.op == CollectiveOp::ALL_TO_ALL);
    }
    CHECK(items[0].bytes == dispatch);
    CHECK(items[1].bytes == 4.0 * 4096 * 2);
    CHECK(items[2].bytes == dispatch);
  }
  // The whole model: 32 MoE layers x 3, and nothing on EP without expert parallelism.
  const StageWork work = cost_stages(model, p, h100());
  CHECK(only(work.chunk_cost[0].fwd_comm, Dim::EP, CollectiveOp::ALL_TO_ALL).size() == 96);
  p.ep = 1;
  const PassCost no_ep = cost_ops(models::layer_ops(model, p, 0), p, h100());
  CHECK(no_ep.fwd_comm.empty());
  // EP moves experts, not work: with balanced routing each GPU runs the same expert FLOPs.
  CHECK(no_ep.fwd_s == rel(layer.fwd_s, 0.05));
}

TEST_CASE("strategies::PassCost: a flex dispatcher sends a token once per GPU and node") {
  // Qwen3-30B-A3B (128 experts, top 8, h 2048), mbs 1, s 4096, bf16: the tokens' bytes once
  // are B = 2 x 4096 x 2048. The all-to-all dispatcher sends all 8 copies (8 B); DeepEP /
  // HybridEP send one per GPU reached: ep 8 in one node, 8 (1 - C(112, 8) / C(128, 8)) =
  // 5.3394 GPUs (models/moe_routing.hpp). Over 2 nodes at ep 16: one copy per node reached
  // on the rail, 2 (1 - C(64, 8) / C(128, 8)) = 1.9938, then 16 (1 - C(120, 8) / C(128, 8))
  // = 6.5965 per rank inside the nodes.
  const auto model = models::load_model("qwen3-30b-a3b");
  models::TrainingPlan p;
  p.seq = 4096;
  p.dp = 8;
  p.ep = 8;
  const double B = 2.0 * 4096 * 2048;
  const auto ops = models::layer_ops(model, p, 0);
  const PassCost a2a = cost_ops(ops, p, h100());
  REQUIRE(a2a.fwd_comm.size() == 3);  // dispatch, its probabilities, combine
  CHECK(a2a.fwd_comm[0].bytes == 8 * B);
  p.moe_dispatcher = models::MoeDispatcher::FLEX;
  const PassCost flex = cost_ops(models::layer_ops(model, p, 0), p, h100());
  REQUIRE(flex.fwd_comm.size() == 2);  // dispatch, combine
  REQUIRE(flex.bwd_comm.size() == 2);
  for (const CommItem& c : flex.fwd_comm) {
    CHECK(c.dim == Dim::EP);
    CHECK(c.op == CollectiveOp::ALL_TO_ALL);
    CHECK(c.bytes == rel(5.3394 * B, 1e-4));
  }
  // The same kernels but the all-to-all dispatcher's sort by expert and unsort (16 local
  // experts): each moves the 8 B copies in and out, 2 x 8 B / (3.35 TB/s x 0.80) + 4 us =
  // 104.17 us; a flex dispatcher's exchange arrives grouped by expert. Its permute reads,
  // and its unpermute writes, the 5.3394 B of tokens received instead of the B sent.
  const double bw = 3.35e12 * 0.80, sorts = 2 * (2 * 8 * B / bw + 4e-6);
  CHECK(a2a.fwd_s - flex.fwd_s == rel(sorts - 2 * 4.3394 * B / bw, 1e-4));
  // The backward runs the inverse copies: the same bytes once, the sorts' and the permutes'.
  CHECK(a2a.bwd_input_s + a2a.bwd_weight_s - flex.bwd_input_s - flex.bwd_weight_s ==
        rel(sorts - 2 * 4.3394 * B / bw, 1e-4));
  p.dp = p.ep = 16;
  const PassCost two =
      cost_ops(models::layer_ops(model, p, 0), p, h100(), OpList::LAYER, 0, true, 2);
  REQUIRE(two.fwd_comm.size() == 4);
  REQUIRE(two.bwd_comm.size() == 4);
  CHECK(two.fwd_comm[0].op == CollectiveOp::RAIL_ALL_TO_ALL);
  CHECK(two.fwd_comm[0].bytes == rel(1.9938 * B, 1e-4));
  CHECK(two.fwd_comm[1].op == CollectiveOp::NODE_ALL_TO_ALL);
  CHECK(two.fwd_comm[1].bytes == rel(6.5965 * B, 1e-4));
  CHECK(two.bwd_comm[2].op == CollectiveOp::RAIL_ALL_TO_ALL);
  // Under the "moe" recompute module the dispatch and combine re-run, both levels.
  p.recompute = models::Recompute::SELECTIVE;
  p.recompute_modules = models::module_bit(models::RecomputeModule::MOE);
  auto rec_ops = models::layer_ops(model, p, 0);
  models::apply_recompute(model, p, 0, rec_ops);
  CHECK(cost_ops(rec_ops, p, h100(), OpList::LAYER, 0, true, 2).recompute_comm.size() == 4);
}

TEST_CASE("strategies::PassCost: the flex exchange's node count, and the MTP layer's exchange") {
  // Two DGX H100 nodes: ranks 0-7 and 8-15. An EP group of 16 spans both evenly; 0-7 plus
  // 8-11 is uneven (its exchange stays one all-to-all); one node is one.
  const auto c = topo::load_cluster(topo::ClusterRequest{"dgx-h100", 2, std::nullopt});
  std::vector<int> all(16), uneven(12), one(8);
  for (int i = 0; i < 16; ++i) all[static_cast<size_t>(i)] = i;
  for (int i = 0; i < 12; ++i) uneven[static_cast<size_t>(i)] = i;
  for (int i = 0; i < 8; ++i) one[static_cast<size_t>(i)] = i;
  CHECK(exchange_nodes(c, all) == 2);
  CHECK(exchange_nodes(c, uneven) == 1);
  CHECK(exchange_nodes(c, one) == 1);
  // DeepSeek-V3's MTP module is a MoE layer costed with the head: its exchange is two-level
  // too (rail, node for dispatch and combine), like the main layers'.
  const auto model = models::load_model("deepseek-v3");
  models::TrainingPlan p;
  p.seq = 4096;
  p.dp = p.ep = 16;
  p.moe_dispatcher = models::MoeDispatcher::FLEX;
  const PassCost head = cost_ops(models::head_ops(model, p), p, h100(), OpList::HEAD, 0, true, 2);
  CHECK(only(head.fwd_comm, Dim::EP, CollectiveOp::RAIL_ALL_TO_ALL).size() == 2);
  const StageWork work = cost_stages(model, p, h100(), 0, 2);
  CHECK(only(work.units[0].back().cost.fwd_comm, Dim::EP, CollectiveOp::RAIL_ALL_TO_ALL).size() ==
        2);
}

TEST_CASE("strategies::PassCost: TE's routed-expert MLP block costs the host its measured time") {
  // TE issue #2897 (GB200, 64 experts, host-bound): forward ~1.2 ms, backward ~2.1 ms; per
  // expert, by hand from its itemisation: (90 + 50) / 64 = 2.1875 us forward, (350 + 200 + 50)
  // / 64 = 9.375 us backward. At 64 experts the block is the measurement; at 8 it is
  // 1.2 ms - 56 x 2.1875 us = 1.0775 ms forward and 2.1 ms - 56 x 9.375 us = 1.575 ms backward;
  // unquantised (bf16) linears leave out the quantisers' 90 / 64 = 1.40625 us per expert.
  CHECK(expert_block_host_s(64).forward_s == rel(1.2e-3));
  CHECK(expert_block_host_s(64).backward_s == rel(2.1e-3));
  CHECK(expert_block_host_s(8).forward_s == rel(1.0775e-3));
  CHECK(expert_block_host_s(8).backward_s == rel(1.575e-3));
  CHECK(expert_block_host_s(8, false).forward_s == rel(1.0775e-3 - 8 * 1.40625e-6));
  CHECK(expert_block_host_s(8, false).backward_s == rel(1.575e-3));
  // Mixtral 8x7B in FP8 at ep 2: 4 local experts. Each grouped linear's host time, its launches
  // at the measuring GB200's 37.08 us (GRACE_HOST_OP_S, TE issue #2053) plus what the block
  // takes beyond them, is half the block's: (1.2 ms - 60 x 2.1875 us) / 2 = 0.534375 ms
  // forward, (2.1 ms - 60 x 9.375 us) / 2 = 0.76875 ms backward.
  const auto model = models::load_model("mixtral-8x7b");
  models::TrainingPlan p;
  p.seq = 4096;
  p.dp = 2;
  p.ep = 2;
  p.precision = models::Precision::FP8;
  const auto ops = models::layer_ops(model, p, 0);
  int grouped = 0;
  for (const auto& op : ops) {
    if (!op.expert || op.kind != models::OpKind::MATMUL) continue;
    ++grouped;
    const PassCost one = cost_ops({op}, p, h100());
    CHECK(one.fwd_launches * GRACE_HOST_OP_S + one.fwd_host_s == rel(0.534375e-3));
    CHECK(one.bwd_launches * GRACE_HOST_OP_S + one.bwd_host_s == rel(0.76875e-3));
  }
  CHECK(grouped == 2);
  const PassCost layer = cost_ops(ops, p, h100());
  CHECK(layer.fwd_host_s > 0);
  // torchtitan's and DeepSpeed's stacks (no TE fusions) and single-process DataParallel count
  // launches only; the launches themselves are the same.
  models::TrainingPlan eager = p;
  eager.fusion = models::Fusion::NONE;
  const PassCost unfused = cost_ops(ops, eager, h100());
  CHECK(unfused.fwd_host_s == 0);
  CHECK(unfused.bwd_host_s == 0);
  CHECK(unfused.fwd_launches == layer.fwd_launches);
  models::TrainingPlan dataparallel = p;
  dataparallel.dp_mode = models::DpMode::DATAPARALLEL;
  CHECK(cost_ops(ops, dataparallel, h100()).fwd_host_s == 0);
  // The block's GEMM launches are issued inside TE's one C++ op, so its measured time covers
  // them however many there are: 256 local experts launch 256 GEMMs per pass, and the
  // grouped linear still costs half the block at the GB200's speed (its extra is negative).
  models::OpCost many = *std::find_if(ops.begin(), ops.end(), [](const models::OpCost& op) {
    return op.expert && op.kind == models::OpKind::MATMUL;
  });
  many.shape.batch = 256;
  const PassCost lots = cost_ops({many}, p, h100());
  CHECK(lots.fwd_launches >= 256);
  CHECK(lots.fwd_host_s < 0);
  CHECK(lots.fwd_launches * GRACE_HOST_OP_S + lots.fwd_host_s ==
        rel(expert_block_host_s(256).forward_s / 2));
  // At 4096 tokens the GPU's forward hides the host's; in bf16 at 128 tokens and ep 8 (one
  // local expert) the GPU takes less than the host, so the forward is host-bound: exactly its
  // host time at 10 us per launch, the block's part scaled from the GB200's 37.08 us.
  CHECK(cost_ops(ops, p, h100(), OpList::LAYER, 10e-6).fwd_s == rel(layer.fwd_s));
  models::TrainingPlan short_seq = p;
  short_seq.seq = 128;
  short_seq.precision = models::Precision::BF16;
  short_seq.dp = short_seq.ep = 8;
  const auto short_ops = models::layer_ops(model, short_seq, 0);
  const PassCost gpu = cost_ops(short_ops, short_seq, h100());
  const PassCost bound = cost_ops(short_ops, short_seq, h100(), OpList::LAYER, 10e-6);
  const double host = gpu.fwd_launches * 10e-6 + gpu.fwd_host_s * (10e-6 / GRACE_HOST_OP_S);
  CHECK(gpu.fwd_s < host);
  CHECK(bound.fwd_s == rel(host));
  CHECK(bound.recompute_s == 0);  // no recompute planned
  // Full recompute re-runs the block's forward on the host too.
  models::TrainingPlan full = short_seq;
  full.recompute = models::Recompute::FULL;
  const PassCost recomputed = cost_ops(short_ops, full, h100());
  CHECK(recomputed.recompute_host_s == rel(recomputed.fwd_host_s));
  // A host twice as slow per launch is twice as slow at the block too.
  const PassCost slow = cost_ops(short_ops, short_seq, h100(), OpList::LAYER, 20e-6);
  CHECK(slow.fwd_s == rel(2 * bound.fwd_s));
  // CUDA graphs do not capture the routed experts (dynamic shapes): their block's host time
  // stays under the full scope.
  models::TrainingPlan graphed = short_seq;
  graphed.cuda_graphs = true;
  CHECK(cost_ops(short_ops, graphed, h100()).fwd_host_s == rel(gpu.fwd_host_s));
  // A dense layer has no expert block.
  const PassCost dense =
      cost_ops(models::layer_ops(models::load_model("llama3-8b"), p, 0), p, h100());
  CHECK(dense.fwd_host_s == 0);
}

TEST_CASE("strategies::PassCost: selective recompute replays only the attention core") {
  // Korthikanti et al. 2022, Sec. 5: selective recompute re-runs the attention core (QKᵀ,
  // softmax, dropout, attention x V), not the projections or the MLP. gpt-1.7b with flash
  // attention on H100: scores and attention x V are each 2 x 24 heads x 2048² x 96 =
  // 1.93274e10 FLOPs, half of it computed under the causal mask, at 518/989 of 989.4
  // TFLOP/s (Hopper, cuDNN, reference shape): 18.6482 us; at this shape (causal 2048, head
  // dim 96) attention_shape_factor = (1024/1224 x 1024/1088 x 96/144) / (2048/2248 x
  // 2048/2112 x 128/176) = 0.817017, so 22.8247 us + 4 us = 26.8247 us each; the fused
  // softmax moves nothing.
  const auto model = models::load_model("gpt-1.7b");
  auto p = plan_with(1);
  p.recompute = models::Recompute::SELECTIVE;
  const PassCost sel = cost_ops(models::layer_ops(model, p, 0), p, h100());
  CHECK(sel.recompute_s == rel(2 * 26.8247e-6, 1e-5));
  p.recompute = models::Recompute::NONE;
  const PassCost none = cost_ops(models::layer_ops(model, p, 0), p, h100());
  CHECK(none.recompute_s == 0);
  // Recompute adds work, it does not change the passes themselves.
  CHECK(sel.fwd_s == rel(none.fwd_s));
  CHECK(sel.bwd_input_s == rel(none.bwd_input_s));
  CHECK(sel.recompute_s < 0.1 * none.fwd_s);
}

TEST_CASE("strategies::PassCost: full recompute replays each layer's whole forward") {
  // Chen et al. 2016 / Megatron --recompute-granularity full: one extra forward per layer.
  const auto model = models::load_model("gpt-1.7b");
  auto p = plan_with(2);
  p.recompute = models::Recompute::FULL;
  const PassCost layer = cost_ops(models::layer_ops(model, p, 0), p, h100());
  CHECK(layer.recompute_s == rel(layer.fwd_s));
  CHECK(layer.recompute_s > 0);
  // Every layer of every virtual stage (pp 2 x vpp 2 chunks of 6 layers).
  p.pp = 2;
  p.vpp = 2;
  const StageWork work = cost_stages(model, p, h100());
  REQUIRE(work.units.size() == 4);
  for (const auto& units : work.units) {
    for (const Unit& u : units)
      if (u.name != "emb" && u.name != "head") CHECK(u.cost.recompute_s == rel(u.cost.fwd_s));
  }
  CHECK(work.units[0].front().name == "emb");
  CHECK(work.units[3].back().name == "head");
  CHECK(work.units[1].size() == 6);
}

TEST_CASE("strategies::PassCost: torchtitan's op-level recompute re-runs what it does not save") {
  // torchtitan's _save_list keeps mm (but every second one), SDPA and reduce-scatter outputs:
  // on Llama-3-8B with tp 2 (sequence-parallel) the recompute pass re-runs wk, wo and w3, the
  // memory-bound ops and the two norms' all-gathers, not the attention and not out_proj's or
  // mlp_down's reduce-scatters.
  const models::ModelSpec m = models::load_model("llama3-8b");
  models::TrainingPlan p;
  p.tp = 2;
  p.sp = true;
  p.seq = 4096;
  p.recompute = models::Recompute::SELECTIVE;
  p.selective_recompute = models::SelectiveRecompute::OP;
  const auto ops = models::layer_ops(m, p, 0);
  const PassCost c = cost_ops(ops, p, h100());
  REQUIRE(c.recompute_comm.size() == 2);
  for (const CommItem& item : c.recompute_comm) {
    CHECK(item.dim == Dim::TP);
    CHECK(item.op == CollectiveOp::ALL_GATHER);
  }
  // The pass's time is the shares of the ops' forwards.
  const std::vector<double> share = models::selective_rerun_fractions(p, ops);
  double by_hand = 0;
  for (size_t i = 0; i < ops.size(); ++i) by_hand += share[i] * cost_ops({ops[i]}, p, h100()).fwd_s;
  CHECK(c.recompute_s == rel(by_hand));
  CHECK(c.recompute_s < c.fwd_s);
  // Megatron's selective recompute (the attention core) re-runs no collective.
  p.selective_recompute = models::SelectiveRecompute::ATTENTION;
  CHECK(cost_ops(models::layer_ops(m, p, 0), p, h100()).recompute_comm.empty());
}

TEST_CASE("strategies::PassCost: the host's speed is the system's") {
  // --host-launch when given; else the GPU's host (TE issue #2053: a DGX H100's Xeon 13.48 us,
  // a GB200's Grace 37.08 us per op); else the 10 us reference.
  CHECK(host_launch_for(20e-6, 37.08e-6) == 20e-6);
  CHECK(host_launch_for(-1, 13.48e-6) == 13.48e-6);
  CHECK(host_launch_for(-1, 0) == REFERENCE_HOST_LAUNCH_S);
  // Mixtral 8x7B in bf16, 128 tokens, one local expert (ep 8): host-bound. On a Grace host the
  // forward takes 37.08 / 13.48 = 2.75 times the Xeon host's, launches and expert block alike
  // (the block measured on a GB200 runs there at its measured time).
  const auto model = models::load_model("mixtral-8x7b");
  models::TrainingPlan p;
  p.seq = 128;
  p.dp = p.ep = 8;
  const auto ops = models::layer_ops(model, p, 0);
  const PassCost xeon = cost_ops(ops, p, h100(), OpList::LAYER, 13.48e-6);
  const PassCost grace = cost_ops(ops, p, h100(), OpList::LAYER, GRACE_HOST_OP_S);
  REQUIRE(xeon.fwd_s > cost_ops(ops, p, h100()).fwd_s);  // host-bound on the faster host too
  CHECK(grace.fwd_s == rel(xeon.fwd_s * 37.08 / 13.48));
  CHECK(grace.fwd_s == rel(grace.fwd_launches * GRACE_HOST_OP_S + grace.fwd_host_s));
}
