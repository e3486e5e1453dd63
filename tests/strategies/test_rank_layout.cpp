#include <doctest/doctest.h>

#include <vector>

#include "common/error.hpp"
#include "strategies/rank_layout.hpp"
#include "topologies/cluster_presets.hpp"

using loom::strategies::Dim;
using loom::strategies::RankLayout;
using Groups = std::vector<std::vector<int>>;

TEST_CASE("strategies::RankLayout: Megatron-LM initialize_model_parallel docstring, TP2 PP4") {
  // megatron/core/parallel_state.py, initialize_model_parallel docstring: "Let's say we have a
  // total of 16 GPUs denoted by g0 ... g15 and we use 2 GPUs to parallelize the model tensor,
  // and 4 GPUs to parallelize the model pipeline. The present function will create 8 tensor
  // model-parallel groups, 4 pipeline model-parallel groups and 8 data-parallel groups as:
  //   8 data_parallel groups: [g0, g2], [g1, g3], [g4, g6], [g5, g7], [g8, g10], [g9, g11],
  //                           [g12, g14], [g13, g15]
  //   8 tensor model-parallel groups: [g0, g1], [g2, g3], [g4, g5], [g6, g7], [g8, g9],
  //                                   [g10, g11], [g12, g13], [g14, g15]
  //   4 pipeline model-parallel groups: [g0, g4, g8, g12], [g1, g5, g9, g13],
  //                                     [g2, g6, g10, g14], [g3, g7, g11, g15]"
  RankLayout layout(2, 1, 1, 2, 4);
  CHECK(layout.groups(Dim::TP) ==
        Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}});
  CHECK(layout.groups(Dim::PP) ==
        Groups{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}});
  CHECK(layout.groups(Dim::DP) ==
        Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}});
}

TEST_CASE("strategies::RankLayout: TP2 PP2 DP4 on two DGX nodes, by the same rule") {
  // Same rule (rank = tp + 2*dp + 8*pp, TP fastest): TP pairs of neighbours, DP stride 2
  // inside each half, PP stride 8 = across the two nodes.
  RankLayout layout(2, 1, 1, 4, 2);
  CHECK(layout.groups(Dim::TP) ==
        Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}});
  CHECK(layout.groups(Dim::DP) ==
        Groups{{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}});
  CHECK(layout.groups(Dim::PP) ==
        Groups{{0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}});
  auto cluster = loom::topo::load_cluster({"dgx-h100", 2, {}});
  CHECK(layout.on_nvlink(Dim::TP, cluster));
  CHECK(layout.on_nvlink(Dim::DP, cluster));
  CHECK_FALSE(layout.on_nvlink(Dim::PP, cluster));
  CHECK(layout.group_of(5, Dim::DP) == std::vector<int>{1, 3, 5, 7});
  CHECK(layout.coordinate(5, Dim::DP) == 2);
  CHECK(layout.strided_subgroup(2, 0) == std::vector<int>{0, 2, 4, 6, 8, 10, 12, 14});
}

TEST_CASE("strategies::RankLayout: order and expert groups") {
  // Order pp fastest: tp groups become strided.
  RankLayout pp_first(2, 1, 1, 1, 2, "pp-tp-cp-ep-dp");
  CHECK(pp_first.groups(Dim::TP) == Groups{{0, 2}, {1, 3}});
  CHECK(pp_first.order() == "pp-tp-cp-ep-dp");
  // EP carved out of DP (Megatron-core expert RankGenerator: tp, ep, edp, pp): TP1 DP4 EP2.
  RankLayout moe(1, 1, 2, 4, 1);
  CHECK(moe.groups(Dim::EP) == Groups{{0, 1}, {2, 3}});
  CHECK(moe.groups(Dim::EDP) == Groups{{0, 2}, {1, 3}});
  CHECK(moe.groups({Dim::TP, Dim::PP}).size() == 4);
  CHECK_THROWS_WITH_AS(RankLayout(1, 1, 3, 4, 1),
                       doctest::Contains("ep 3 does not divide dp 4 x cp 1 = 4"),
                       loom::ValidationError);
  CHECK_THROWS_WITH_AS(RankLayout(2, 1, 1, 2, 2, "tp-xp-dp"),
                       doctest::Contains("unknown dimension 'xp'"), loom::ValidationError);
  CHECK_THROWS_WITH_AS(RankLayout(2, 1, 1, 2, 2, "tp-dp"), doctest::Contains("leaves out pp"),
                       loom::ValidationError);
}

TEST_CASE("strategies::RankLayout: expert tensor parallelism 1 folds experts across TP") {
  // Megatron-core parallel_state.py expert RankGenerator (tp=etp, ep, dp=edp, pp, order
  // tp-ep-dp-pp): TP2 DP2 with etp 1, ep 4: one EP group over all 4 ranks, edp 1. Dense
  // groups are unchanged (TP {0,1},{2,3}).
  loom::models::TrainingPlan plan;
  plan.tp = 2;
  plan.dp = 2;
  plan.ep = 4;
  plan.etp = 1;
  RankLayout folded(plan);
  CHECK(folded.groups(Dim::TP) == Groups{{0, 1}, {2, 3}});
  CHECK(folded.groups(Dim::EP) == Groups{{0, 1, 2, 3}});
  CHECK(folded.size(Dim::EDP) == 1);
  // etp 1, ep 2: EP groups are consecutive ranks (TP neighbours), EDP strided by 2.
  plan.ep = 2;
  RankLayout half(plan);
  CHECK(half.groups(Dim::EP) == Groups{{0, 1}, {2, 3}});
  CHECK(half.groups(Dim::EDP) == Groups{{0, 2}, {1, 3}});
  plan.ep = 8;
  CHECK_THROWS_AS(RankLayout{plan}, loom::ValidationError);
}
