// The one bytes-per-element table.
#include <doctest/doctest.h>

#include "common/dtype.hpp"

using namespace loom;

TEST_CASE("common::DType: bytes per element and names") {
  // IEEE 754 binary32 and binary16, bfloat16 (16 bits), OCP FP8 E4M3/E5M2 (8 bits); TF32 is
  // a tensor-core mode over binary32 storage (NVIDIA A100 whitepaper).
  CHECK(bytes_per_element(DType::FP32) == 4);
  CHECK(bytes_per_element(DType::TF32) == 4);
  CHECK(bytes_per_element(DType::BF16) == 2);
  CHECK(bytes_per_element(DType::FP16) == 2);
  CHECK(bytes_per_element(DType::FP8) == 1);
  CHECK(to_string(DType::TF32) == "tf32");
  CHECK(to_string(DType::FP8) == "fp8");
  static_assert(bytes_per_element(DType::BF16) == 2, "usable in constant expressions");
}
