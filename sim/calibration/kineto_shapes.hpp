#pragma once
// Internal to the Kineto importer (kineto.cpp, kineto_names.cpp): reading shapes and dtypes
// from a trace event's arguments. Includes nlohmann/json: include only from .cpp files.
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>

#include "sim/calibration/kineto.hpp"

namespace loom::calibration::kineto {

/// The GEMM a CPU op ran, from its name and args ("Input Dims", "Input type"); nullopt for
/// other ops or shapes it cannot read (missing record_shapes, a matrix-vector product).
std::optional<GemmShape> gemm_shape(std::string_view op, const nlohmann::json& args);

/// loom's spelling of a PyTorch dtype ("c10::BFloat16" or "BFloat16" -> "bf16") and its
/// bytes per element (0 when unknown).
std::pair<std::string, double> dtype_of(std::string_view torch_name);

}  // namespace loom::calibration::kineto
