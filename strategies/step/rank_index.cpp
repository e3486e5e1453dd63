#include "strategies/step/rank_index.hpp"

#include "common/error.hpp"

namespace loom::strategies {

RankIndex::RankIndex(const RankLayout& layout, const models::TrainingPlan& plan)
    : tp_(plan.tp), cp_(plan.cp), dp_(plan.dp) {
  const size_t world = static_cast<size_t>(layout.world_size());
  for (int d = 0; d < DIMS; ++d) {
    groups_[d] = layout.groups(static_cast<Dim>(d));
    group_of_[d].assign(world, 0);
    coord_[d].assign(world, 0);
    for (size_t g = 0; g < groups_[d].size(); ++g)
      for (size_t i = 0; i < groups_[d][g].size(); ++i) {
        group_of_[d][static_cast<size_t>(groups_[d][g][i])] = static_cast<int>(g);
        coord_[d][static_cast<size_t>(groups_[d][g][i])] = static_cast<int>(i);
      }
  }
  ranks_.assign(world, -1);
  auto coord = [&](Dim dim, size_t r) { return coord_[static_cast<int>(dim)][r]; };
  for (size_t r = 0; r < world; ++r)
    ranks_[index(coord(Dim::TP, r), coord(Dim::CP, r), coord(Dim::DP, r), coord(Dim::PP, r))] =
        static_cast<int>(r);
}

const std::vector<int>& RankIndex::group(int rank, Dim dim) const {
  const int d = static_cast<int>(dim);
  return groups_[d][static_cast<size_t>(group_of_[d][static_cast<size_t>(rank)])];
}

}  // namespace loom::strategies
