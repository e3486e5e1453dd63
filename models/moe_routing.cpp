#include "models/moe_routing.hpp"

#include <algorithm>

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

// C(n, k) as a double (small n: groups).
double choose(int n, int k) {
  if (k < 0 || k > n) return 0;
  double r = 1;
  for (int i = 0; i < k; ++i) r = r * (n - i) / (i + 1);
  return r;
}

}  // namespace

double expected_blocks_reached(const MoeSpec& moe, int blocks) {
  const int E = moe.experts, k = moe.top_k;
  if (blocks < 1 || E % blocks != 0)
    throw InternalError("expected_blocks_reached: blocks must divide the experts");
  const double per_block = static_cast<double>(E) / blocks;
  const int G = moe.routing_groups, Gk = moe.routing_group_top_k;
  // Chance that a block is missed.
  double miss = 0;
  if (G <= 1 || Gk >= G) {
    miss = choose_ratio(E - per_block, E, k);
  } else {
    const double per_group = static_cast<double>(E) / G;
    const double pool = Gk * per_group;  // the experts of the chosen groups
    if (blocks >= G && blocks % G == 0) {
      // A block lies inside one group: missed when its group is not chosen, or is and the
      // k draws from the pool miss it.
      const double chosen = static_cast<double>(Gk) / G;
      miss = (1 - chosen) + chosen * choose_ratio(pool - per_block, pool, k);
    } else if (G % blocks == 0) {
      // A block holds q whole groups; j of them chosen (hypergeometric), then the k draws
      // miss their j x per_group experts.
      const int q = G / blocks;
      for (int j = 0; j <= std::min(q, Gk); ++j) {
        const double pj = choose(q, j) * choose(G - q, Gk - j) / choose(G, Gk);
        miss += pj * choose_ratio(pool - j * per_group, pool, k);
      }
    } else {
      miss = choose_ratio(E - per_block, E, k);  // blocks straddle groups: no group limit
    }
  }
  return blocks * (1 - miss);
}

}  // namespace loom::models
