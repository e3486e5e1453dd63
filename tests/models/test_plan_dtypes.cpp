// Which element format each tensor of a plan uses, and that the op list sizes weights and
// activations from it.
#include <doctest/doctest.h>

#include <string>
#include <utility>

#include "models/flops.hpp"
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
