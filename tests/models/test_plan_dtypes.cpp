// Which element format each tensor of a plan uses, and that the op list sizes weights and
// activations from it.
#include <doctest/doctest.h>

#include <string>
#include <utility>

#include "models/flops.hpp"
#include "models/memory.hpp"
#include "models/model_loader.hpp"
#include "models/plan_dtypes.hpp"

using namespace loom;
using namespace loom::models;

TEST_CASE("models::PlanDtypes: fp8 keeps bf16 parameters and reads an fp8 weight cast") {
  // Transformer Engine fp8 recipe, fp8_model_params off (its default): parameters and
  // activations stay bf16; GEMMs read the cached fp8 cast of each weight.
  CHECK(parameter_dtype(Precision::FP8) == DType::BF16);
  CHECK(matmul_weight_dtype(Precision::FP8) == DType::FP8);
  CHECK(activation_dtype(Precision::FP8) == DType::BF16);
  CHECK(compute_dtype(Precision::FP8) == DType::FP8);
  // fp32 training stores fp32 and multiplies on TF32 tensor cores (PyTorch/Megatron default).
  CHECK(parameter_dtype(Precision::FP32) == DType::FP32);
  CHECK(compute_dtype(Precision::FP32) == DType::TF32);
  CHECK(parameter_dtype(Precision::FP16) == DType::FP16);
  CHECK(gradient_dtype(Precision::BF16, GradDtype::FP32) == DType::FP32);
  CHECK(gradient_dtype(Precision::BF16, GradDtype::BF16) == DType::BF16);
  CHECK(gradient_dtype(Precision::FP32, GradDtype::FP32) == DType::FP32);
}

TEST_CASE("models::PlanDtypes: a GEMM's weight bytes follow the matmul weight format") {
  // Llama-3-8B qkv_proj without TP: a [4096 x (4096 + 1024 + 1024)] weight, read once.
  const ModelSpec m = model_preset("llama3-8b");
  const double elements = 4096.0 * 6144;
  for (auto [precision, bytes] : {std::pair{Precision::FP32, 4.0}, std::pair{Precision::BF16, 2.0},
                                  std::pair{Precision::FP8, 1.0}}) {
    TrainingPlan plan;
    plan.precision = precision;
    plan.seq = 1024;
    for (const OpCost& op : layer_ops(m, plan, 0))
      if (op.name == "qkv_proj") CHECK(op.weight_bytes == elements * bytes);
    CHECK(activation_element_bytes(plan) == (precision == Precision::FP32 ? 4.0 : 2.0));
  }
}

TEST_CASE("models::PlanDtypes: nvfp4 keeps bf16 parameters, FP4 weight casts and saved inputs") {
  // Megatron-Bridge bf16_with_nvfp4_mixed (fp4 "e2m1", no fp4 parameters): parameters and
  // activations stay bf16; linears read and save FP4 copies with an E4M3 scale per 16.
  CHECK(parameter_dtype(Precision::NVFP4) == DType::BF16);
  CHECK(matmul_weight_dtype(Precision::NVFP4) == DType::FP4);
  CHECK(compute_dtype(Precision::NVFP4) == DType::FP4);
  CHECK(low_precision_linears(Precision::NVFP4));
  CHECK_FALSE(low_precision_linears(Precision::BF16));
  CHECK(bytes_per_element(DType::FP4) == 0.5);
  // The weight cache: row- and column-wise FP4 copies, 2 x (0.5 + 1/16) = 1.125 B/param.
  TrainingPlan p;
  p.precision = Precision::NVFP4;
  CHECK(bytes_per_parameter(p).fp8_cache == doctest::Approx(1.125));
  // A linear's saved input: FP8 keeps 1 B per element, NVFP4 0.5625 B, bf16 2 B. The Q/K/V
  // projection also keeps its outputs for attention, which stays 16-bit: Llama-3-8B at
  // s 2048, b 1: input 2 x 2048 x 4096 B, q, k, v 2 x 2048 x (4096 + 1024 + 1024) B.
  const ModelSpec m = model_preset("llama3-8b");
  auto saved_of_qkv = [&](Precision precision) {
    TrainingPlan q;
    q.precision = precision;
    for (const OpCost& op : layer_ops(m, q, 0))
      if (op.kind == OpKind::MATMUL && op.fp8_linear) return op.saved_bytes;
    return 0.0;
  };
  const double input = 2.0 * 2048 * 4096, qkv = 2.0 * 2048 * (4096 + 1024 + 1024);
  CHECK(saved_of_qkv(Precision::BF16) == doctest::Approx(input + qkv));
  CHECK(saved_of_qkv(Precision::FP8) == doctest::Approx(input / 2 + qkv));
  CHECK(saved_of_qkv(Precision::NVFP4) == doctest::Approx(input * 0.5625 / 2 + qkv));
}
