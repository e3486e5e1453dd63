// Recursive halving-doubling lowering (Rabenseifner) and binomial trees for broadcast and
// reduce; power-of-two groups only.
#include <fmt/format.h>

#include <algorithm>

#include "common/error.hpp"
#include "sim/collective_lowering.hpp"

namespace loom::sim {

using Op = CollectiveOp;

namespace {

bool is_power_of_two(int n) {
  return n > 0 && (n & (n - 1)) == 0;
}

void exchange(ScheduleBuilder& b, int distance, double bytes) {
  int p = b.begin_pattern();
  for (int i = 0; i < b.n(); ++i) b.flow(b.v(i), b.v(i ^ distance), bytes);
  b.phase(p);
}

}  // namespace

std::optional<std::string> halving_doubling_cannot_run(const ScheduleBuilder& b) {
  if (is_power_of_two(b.n())) return std::nullopt;
  return fmt::format("needs a power-of-two group; this group has {} ranks", b.n());
}

void lower_halving_doubling(ScheduleBuilder& b, Op op, double S, int root) {
  const int n = b.n();  // a power of two (halving_doubling_cannot_run)
  auto halving = [&] {
    for (int d = n / 2, part = 2; d >= 1; d /= 2, part *= 2) exchange(b, d, S / part);
  };
  auto doubling = [&] {
    for (int d = 1; d < n; d *= 2) exchange(b, d, S * d / n);
  };
  switch (op) {
    case Op::ALL_REDUCE:
      halving();
      doubling();
      return;
    case Op::REDUCE_SCATTER:
      halving();
      return;
    case Op::ALL_GATHER:
      doubling();
      return;
    case Op::BROADCAST:
    case Op::REDUCE: {
      // Binomial tree relative to the root: step with distance d pairs i < d with i + d.
      std::vector<int> distances;
      for (int d = 1; d < n; d *= 2) distances.push_back(d);
      if (op == Op::REDUCE) std::reverse(distances.begin(), distances.end());
      for (int d : distances) {
        int p = b.begin_pattern();
        for (int i = 0; i < d; ++i) {
          int a = (root + i) % n, c = (root + i + d) % n;
          if (op == Op::BROADCAST) {
            b.flow(b.v(a), b.v(c), S);
          } else {
            b.flow(b.v(c), b.v(a), S);
          }
        }
        b.phase(p);
      }
      return;
    }
    default:
      throw InternalError(fmt::format("halving-doubling lowering asked for {}", to_string(op)));
  }
}

}  // namespace loom::sim
