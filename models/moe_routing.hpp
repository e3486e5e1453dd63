#pragma once
// Where a token's routed copies go: the expected number of distinct expert blocks (the
// experts of one GPU, or of one node) that a token's top-k experts reach. Dispatchers that
// send a token once per destination GPU or node (DeepEP, HybridEP) move that many copies
// instead of top_k.
#include "models/model_spec.hpp"

namespace loom::models {

/// Expected number of the `blocks` equal blocks of consecutive experts (E / blocks each; the
/// experts of one GPU when blocks = ep, of one node when blocks = the nodes an EP group spans)
/// that one token's top_k experts reach, when routing picks experts uniformly: top_k distinct
/// experts of E, or with group-limited routing top_k of the experts of routing_group_top_k
/// groups picked uniformly. Megatron's benchmarks force balanced routing with random logits
/// (--moe-router-force-load-balancing), which picks experts uniformly; with group-limited
/// routing it picks the groups by their top-2 logits, which spreads a token's experts over
/// its groups more evenly than uniform draws (a Monte Carlo of that rule: DeepSeek-V3 over 8
/// nodes reaches 3.97 nodes, this 3.63), so across nodes this is a lower bound. Between 1
/// and min(blocks, top_k); `blocks` must divide the experts (1 <= blocks <= E); the groups
/// are enumerated (C(groups, group_top_k) subsets).
double expected_blocks_reached(const MoeSpec& moe, int blocks);

}  // namespace loom::models
