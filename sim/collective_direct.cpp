// Direct and master-worker lowerings: every rank straight to its peers, or everything
// through the root.
#include <fmt/format.h>

#include "common/error.hpp"
#include "sim/collective_lowering.hpp"

namespace loom::sim {

using Op = CollectiveOp;

namespace {

void all_pairs(ScheduleBuilder& b, double bytes, int times) {
  int p = b.begin_pattern();
  for (int i = 0; i < b.n(); ++i)
    for (int j = 0; j < b.n(); ++j) b.flow(b.v(i), b.v(j), bytes);
  b.phase(p, true, times);
}

void from_root(ScheduleBuilder& b, int root, double bytes) {
  int p = b.begin_pattern();
  for (int j = 0; j < b.n(); ++j) b.flow(b.v(root), b.v(j), bytes);
  b.phase(p);
}

void to_root(ScheduleBuilder& b, int root, double bytes) {
  int p = b.begin_pattern();
  for (int j = 0; j < b.n(); ++j) b.flow(b.v(j), b.v(root), bytes);
  b.phase(p);
}

}  // namespace

void lower_direct(ScheduleBuilder& b, Op op, double S, int root) {
  const int n = b.n();
  switch (op) {
    case Op::SEND_RECV: {
      int p = b.begin_pattern();
      if (n == 2) {
        b.flow(b.v(root), b.v(1 - root), S);
      } else {
        for (int i = 0; i < n; ++i) b.flow(b.v(i), b.v((i + 1) % n), S);
      }
      b.phase(p);
      return;
    }
    case Op::ALL_REDUCE:
      all_pairs(b, S / n, 2);
      return;
    case Op::ALL_GATHER:
    case Op::REDUCE_SCATTER:
    case Op::ALL_TO_ALL:
      all_pairs(b, S / n, 1);
      return;
    case Op::BROADCAST:
      from_root(b, root, S);
      return;
    case Op::SCATTER:
      from_root(b, root, S / n);
      return;
    case Op::GATHER:
      to_root(b, root, S / n);
      return;
    case Op::REDUCE:
      to_root(b, root, S);
      return;
    default:
      throw InternalError(fmt::format("direct lowering asked for {}", to_string(op)));
  }
}

void lower_master_worker(ScheduleBuilder& b, Op op, double S, int root) {
  switch (op) {
    case Op::ALL_REDUCE:
      to_root(b, root, S);
      from_root(b, root, S);
      return;
    case Op::REDUCE:
      to_root(b, root, S);
      return;
    case Op::BROADCAST:
      from_root(b, root, S);
      return;
    case Op::SCATTER:
      from_root(b, root, S / b.n());
      return;
    case Op::GATHER:
      to_root(b, root, S / b.n());
      return;
    default:
      throw InternalError(fmt::format("master-worker lowering asked for {}", to_string(op)));
  }
}

}  // namespace loom::sim
