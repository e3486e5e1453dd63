#include "models/moe_routing.hpp"

#include <algorithm>
#include <vector>

#include "common/error.hpp"

namespace loom::models {
namespace {

// C(a, k) / C(b, k) for a <= b: the chance that k draws without replacement from b items all
// miss the b - a others. 0 when a < k.
double choose_ratio(double a, double b, int k) {
  double r = 1;
  for (int i = 0; i < k; ++i) {
    if (a - i <= 0) return 0;
    r *= (a - i) / (b - i);
  }
  return r;
}

// Calls f(chosen) for every `pick`-subset of {0 .. n-1}, in lexicographic order.
template <typename F>
void each_subset(int n, int pick, F&& f) {
  std::vector<int> chosen(static_cast<size_t>(pick));
  for (int i = 0; i < pick; ++i) chosen[static_cast<size_t>(i)] = i;
  while (true) {
    f(chosen);
    int i = pick - 1;
    while (i >= 0 && chosen[static_cast<size_t>(i)] == n - pick + i) --i;
    if (i < 0) return;
    ++chosen[static_cast<size_t>(i)];
    for (int j = i + 1; j < pick; ++j)
      chosen[static_cast<size_t>(j)] = chosen[static_cast<size_t>(j - 1)] + 1;
  }
}

}  // namespace

double expected_blocks_reached(const MoeSpec& moe, int blocks) {
  const int E = moe.experts, k = moe.top_k;
  if (blocks < 1 || E % blocks != 0)
    throw InternalError("expected_blocks_reached: blocks must divide the experts");
  const int per_block = E / blocks;
  const int G = moe.routing_groups, Gk = moe.routing_group_top_k;
  if (G <= 1 || Gk >= G)  // every expert equally likely: a block is missed by all k draws
    return blocks * (1 - choose_ratio(E - per_block, E, k));
  // Group-limited: every Gk-subset of the G groups equally likely, then k of its pool of
  // Gk x E/G experts. A block with m experts in the pool is missed with C(pool - m, k) /
  // C(pool, k); averaged over the subsets (C(8, 4) = 70 for DeepSeek-V3), exact for blocks
  // inside groups, spanning several, or straddling their edges.
  const int per_group = E / G;
  const double pool = static_cast<double>(Gk) * per_group;
  double missed = 0, subsets = 0;
  std::vector<int> in_pool(static_cast<size_t>(blocks));
  each_subset(G, Gk, [&](const std::vector<int>& chosen) {
    std::fill(in_pool.begin(), in_pool.end(), 0);
    for (int g : chosen)
      for (int e = g * per_group; e < (g + 1) * per_group; ++e)
        ++in_pool[static_cast<size_t>(e / per_block)];
    for (int m : in_pool) missed += choose_ratio(pool - m, pool, k);
    subsets += 1;
  });
  return blocks - missed / subsets;
}

}  // namespace loom::models
