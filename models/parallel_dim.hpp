#pragma once
// The parallel dimensions of a training plan, named once for the whole project: the memory
// model and the op list (models/), the rank layout and the lowering (strategies/) and the
// report all index by this one enum.
#include <array>
#include <string>

namespace loom::models {

/// A parallel dimension. EDP is the expert data-parallel group (ranks holding the same
/// experts, Megatron-core's expert data-parallel group).
enum class Dim { TP, CP, EP, DP, PP, EDP };
inline constexpr int DIM_COUNT = 6;

/// The dimensions whose communication a step report breaks down, in report order.
inline constexpr std::array<Dim, 5> REPORTED_COMM_DIMS = {Dim::TP, Dim::CP, Dim::EP, Dim::PP,
                                                          Dim::DP};

/// "tp", "cp", "ep", "dp", "pp", "edp".
std::string to_string(Dim dim);

/// Index of `dim` into arrays of DIM_COUNT entries.
constexpr int index(Dim dim) {
  return static_cast<int>(dim);
}

}  // namespace loom::models
