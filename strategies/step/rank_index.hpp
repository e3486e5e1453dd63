#pragma once
// Process groups and coordinates of every rank, computed once from the layout: each
// RankLayout query walks the whole world, so per-rank queries during lowering would be
// quadratic in the GPU count.
#include <cstddef>
#include <vector>

#include "models/training_plan.hpp"
#include "strategies/rank_layout.hpp"

namespace loom::strategies {

/// Rank <-> (tp, cp, dp, pp) coordinates and the group of each dimension (EDP included).
class RankIndex {
 public:
  RankIndex(const RankLayout& layout, const models::TrainingPlan& plan);
  /// The global rank at coordinates (tp t, cp c, dp d, pp p).
  int rank(int t, int c, int d, int p) const { return ranks_[index(t, c, d, p)]; }
  /// The group of `dim` holding `rank`.
  const std::vector<int>& group(int rank, Dim dim) const;

 private:
  static constexpr int DIMS = 6;  // every Dim: TP, CP, EP, DP, PP, EDP
  size_t index(int t, int c, int d, int p) const {
    return ((static_cast<size_t>(p) * dp_ + d) * cp_ + c) * tp_ + t;
  }
  int tp_, cp_, dp_;
  std::vector<int> ranks_;
  std::vector<std::vector<int>> groups_[DIMS];  // by Dim
  std::vector<int> group_of_[DIMS];
  std::vector<int> coord_[DIMS];
};

}  // namespace loom::strategies
