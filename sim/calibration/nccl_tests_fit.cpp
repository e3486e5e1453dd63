#include "sim/calibration/nccl_tests_fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <queue>
#include <tuple>

#include "sim/calibration/nccl_tests_text.hpp"

namespace loom::calibration::nccl_fit {

namespace {

using Op = sim::CollectiveOp;

// The collectives nccl-tests has a program for, in loom's op order.
constexpr Op NCCL_TESTS_OPS[] = {Op::SEND_RECV,  Op::BROADCAST,      Op::SCATTER,
                                 Op::GATHER,     Op::REDUCE,         Op::ALL_GATHER,
                                 Op::ALL_REDUCE, Op::REDUCE_SCATTER, Op::ALL_TO_ALL};

// nccl-tests' TimeTest calls: which print redop "none" and which pass a root.
bool prints_redop(Op op) {
  return op == Op::ALL_REDUCE || op == Op::REDUCE_SCATTER || op == Op::REDUCE ||
         op == Op::SEND_RECV;
}
bool has_root(Op op) {
  return op == Op::BROADCAST || op == Op::REDUCE || op == Op::GATHER || op == Op::SCATTER;
}

}  // namespace

std::string_view bus_factor_formula(sim::CollectiveOp op) {
  switch (op) {
    case Op::ALL_REDUCE:
      return "2(n-1)/n";
    case Op::ALL_GATHER:
    case Op::REDUCE_SCATTER:
    case Op::ALL_TO_ALL:
    case Op::GATHER:
    case Op::SCATTER:
      return "(n-1)/n";
    default:
      return "1";
  }
}

void RatioBounds::add(std::string_view algbw, std::string_view busbw) {
  const auto a = nccl_text::number_of(algbw), b = nccl_text::number_of(busbw);
  const auto ea = nccl_text::half_unit(algbw), eb = nccl_text::half_unit(busbw);
  if (!a || !b || !ea || !eb || !(*a > *ea)) return;  // 0.00: rounding says nothing
  low = std::max(low, (*b - *eb) / (*a + *ea));
  high = std::min(high, (*b + *eb) / (*a - *ea));
  ++rows;
}

std::vector<sim::CollectiveOp> candidates(const Signature& s) {
  std::vector<Op> out;
  for (Op op : NCCL_TESTS_OPS) {
    if (!s.redop.empty() && (s.redop != "none") != prints_redop(op)) continue;
    if (s.root && (*s.root >= 0) != has_root(op)) continue;
    if (s.ratio.rows > 0) {
      // The factor is exact; the bounds come from printed roundings, so only the division
      // itself needs room.
      const double f = sim::bus_bandwidth_factor(op, s.group_size);
      const double slack = 1e-9 * std::max(1.0, f);
      if (f < s.ratio.low - slack || f > s.ratio.high + slack) continue;
    }
    out.push_back(op);
  }
  return out;
}

std::string evidence(const Signature& s, sim::CollectiveOp op) {
  std::string text;
  if (s.ratio.rows > 0) {
    text =
        fmt::format("busbw/algbw {:g} = {} with n={}", sim::bus_bandwidth_factor(op, s.group_size),
                    bus_factor_formula(op), s.group_size);
  } else {
    text = fmt::format("no busbw/algbw above rounding, n={}", s.group_size);
  }
  if (!s.redop.empty()) text += fmt::format(", redop {}", s.redop);
  if (s.root) text += fmt::format(", root {}", *s.root);
  return text;
}

namespace {

// One series (out-of-place or in-place) of a table: log size, log time, point index.
struct Series {
  std::vector<double> x, y;
  std::vector<size_t> point;
};

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

// y at x[i] on the line through points j and k of the series.
double on_line(const Series& s, size_t i, size_t j, size_t k) {
  const double dx = s.x[k] - s.x[j];
  const double slope = dx != 0 ? (s.y[k] - s.y[j]) / dx : 0;
  return s.y[j] + slope * (s.x[i] - s.x[j]);
}

constexpr size_t NONE = static_cast<size_t>(-1);

// What the lines through a time's nearest sound neighbours predict for it: the line through
// the nearest on each side, and the lines through the two nearest on each side (at an end,
// the next two further in). Neighbours come from a linked list of the sound times.
struct Band {
  double low = std::numeric_limits<double>::infinity();
  double high = -std::numeric_limits<double>::infinity();
  double middle = 0;  // the median prediction
  int predictions = 0;
};

Band band_of(const Series& s, size_t i, const std::vector<size_t>& prev,
             const std::vector<size_t>& next) {
  const auto step = [](const std::vector<size_t>& along, size_t from) {
    return from == NONE ? NONE : along[from];
  };
  const size_t l1 = prev[i], l2 = step(prev, l1), r1 = next[i], r2 = step(next, r1);
  Band b;
  double sum = 0;
  const auto predict = [&](size_t j, size_t k) {
    if (j == NONE || k == NONE) return;
    const double y = on_line(s, i, j, k);
    b.low = std::min(b.low, y), b.high = std::max(b.high, y), sum += y;
    ++b.predictions;
  };
  predict(l1, r1);
  predict(l2, l1);
  predict(r1, r2);
  if (b.predictions < 2) {
    predict(step(prev, l2), l2);
    predict(r2, step(next, r2));
  }
  b.middle = b.predictions == 3 ? sum - b.low - b.high : 0.5 * (b.low + b.high);
  return b;
}

// The linked list of the times not `out`: prev/next sound neighbour of every time.
void links(const std::vector<bool>& out, std::vector<size_t>& prev, std::vector<size_t>& next) {
  const size_t n = out.size();
  size_t last = NONE;
  for (size_t i = 0; i < n; ++i) {
    prev[i] = last;
    if (!out[i]) last = i;
  }
  last = NONE;
  for (size_t i = n; i-- > 0;) {
    next[i] = last;
    if (!out[i]) last = i;
  }
}

// Flags of one series (`out`: flagged before, by the pair test): a time is an outlier when it lies
// outside the band its sound neighbours predict by more than the band is wide (how surely they know
// the trend there) and more than 3 x `noise`. Worst first (by distance from the median prediction,
// which one bad neighbour cannot move): each outlier leaves the list of sound times and its
// neighbours are judged again without it, so a bad row does not make its good neighbours look bad,
// nor two bad rows side by side hide each other. Each removal re-queues a bounded number of
// neighbours: O(n log n).
std::vector<bool> outliers_of(const Series& s, double noise, std::vector<bool> out) {
  const size_t n = s.y.size();
  std::vector<size_t> prev(n), next(n);
  links(out, prev, next);
  std::vector<int> version(n, 0);
  using Item = std::tuple<double, size_t, int>;  // (score, index, version)
  std::vector<Item> items;
  const auto judge = [&](size_t i) {
    if (i == NONE || out[i]) return;
    const Band b = band_of(s, i, prev, next);
    ++version[i];
    if (b.predictions >= 2) items.emplace_back(std::abs(s.y[i] - b.middle), i, version[i]);
  };
  for (size_t i = 0; i < n; ++i) judge(i);
  std::priority_queue<Item> queue(std::less<Item>(), std::move(items));  // heapified: O(n)
  const auto enqueue = [&](size_t i) {
    items.clear();
    judge(i);
    if (!items.empty()) queue.push(items.front());
  };
  while (!queue.empty()) {
    const auto [score, i, v] = queue.top();
    queue.pop();
    if (v != version[i]) continue;  // judged again since
    if (score <= 3 * noise) break;  // the band holds the median: nothing further can fail
    const Band b = band_of(s, i, prev, next);
    const double margin = std::max(b.high - b.low, 3 * noise);
    if (!(s.y[i] > b.high + margin || s.y[i] < b.low - margin)) continue;
    out[i] = true;
    const size_t l = prev[i], r = next[i];
    if (l != NONE) next[l] = r;
    if (r != NONE) prev[r] = l;
    // The times whose two nearest neighbours on a side (or three, at an end) included it.
    size_t left = l, right = r;
    for (int k = 0; k < 3; ++k) {
      enqueue(left), enqueue(right);
      left = left == NONE ? NONE : prev[left];
      right = right == NONE ? NONE : next[right];
    }
  }
  return out;
}

// Roughness of a series: the scaled median distance of each time from the line through its
// two neighbours (the curve's own bends at protocol and algorithm switches, and noise).
double series_noise(const Series& s) {
  std::vector<double> r;
  for (size_t i = 1; i + 1 < s.y.size(); ++i)
    r.push_back(std::abs(s.y[i] - on_line(s, i, i - 1, i + 1)));
  return 1.4826 * median_of(std::move(r));
}

}  // namespace

void mark_outliers(CollectiveTable& table, std::vector<std::string>& notes) {
  auto& pts = table.points;
  Series oop, ip;
  std::vector<double> pair_noise;
  for (size_t i = 0; i < pts.size(); ++i) {
    const CollectivePoint& p = pts[i];
    const double x = std::log(p.bytes);
    if (p.out_of_place_seconds) {
      oop.x.push_back(x), oop.y.push_back(std::log(*p.out_of_place_seconds));
      oop.point.push_back(i);
    }
    if (p.in_place_seconds) {
      ip.x.push_back(x), ip.y.push_back(std::log(*p.in_place_seconds));
      ip.point.push_back(i);
    }
    if (p.out_of_place_seconds && p.in_place_seconds)
      pair_noise.push_back(std::abs(std::log(*p.out_of_place_seconds / *p.in_place_seconds)));
  }
  // Noise: run to run (the same collective timed twice, out-of-place and in-place, at each
  // size) or the series' roughness, whichever is larger; 1.4826 x the median absolute
  // deviation estimates a normal spread's sigma.
  const double pair_sigma = 1.4826 * median_of(pair_noise);
  const double oop_noise = std::max(pair_sigma, series_noise(oop));
  const double ip_noise = std::max(pair_sigma, series_noise(ip));
  // The pair test: where the two times of one size disagree by more than either series is
  // rough, the one farther from its own neighbours' median prediction is the outlier. It
  // catches the bad rows that stand side by side and shield each other in the trend test.
  std::vector<bool> oop_out(oop.y.size(), false), ip_out(ip.y.size(), false);
  {
    std::vector<size_t> oop_prev(oop.y.size()), oop_next(oop.y.size());
    std::vector<size_t> ip_prev(ip.y.size()), ip_next(ip.y.size());
    links(oop_out, oop_prev, oop_next);
    links(ip_out, ip_prev, ip_next);
    std::vector<size_t> in_ip(pts.size(), NONE);
    for (size_t k = 0; k < ip.point.size(); ++k) in_ip[ip.point[k]] = k;
    const auto distance = [](const Series& s, size_t i, const Band& b) {
      return b.predictions >= 2 ? std::abs(s.y[i] - b.middle) : 0.0;
    };
    for (size_t j = 0; j < oop.point.size(); ++j) {
      const size_t k = in_ip[oop.point[j]];
      if (k == NONE || !(std::abs(oop.y[j] - ip.y[k]) > 3 * std::max(oop_noise, ip_noise)))
        continue;
      const double o = distance(oop, j, band_of(oop, j, oop_prev, oop_next));
      const double i = distance(ip, k, band_of(ip, k, ip_prev, ip_next));
      if (o > i) {
        oop_out[j] = true;
      } else if (i > o) {
        ip_out[k] = true;
      }
    }
  }
  const auto flag = [&](const Series& s, double noise, std::vector<bool> pre,
                        bool CollectivePoint::*field, const char* which) {
    const std::vector<bool> out = outliers_of(s, noise, std::move(pre));
    for (size_t i = 0; i < out.size(); ++i) {
      if (!out[i]) continue;
      CollectivePoint& p = pts[s.point[i]];
      p.*field = true;
      notes.push_back(fmt::format(
          "{}: {} time {:g} us at {:.0f} B breaks the size/time trend of its neighbours; "
          "down-weighted, not averaged in",
          p.source, which, std::exp(s.y[i]) * 1e6, p.bytes));
    }
  };
  flag(oop, oop_noise, std::move(oop_out), &CollectivePoint::out_of_place_outlier, "out-of-place");
  flag(ip, ip_noise, std::move(ip_out), &CollectivePoint::in_place_outlier, "in-place");
  for (CollectivePoint& p : pts) {
    if (!p.out_of_place_outlier && !p.in_place_outlier) continue;
    double sum = 0;
    int measured = 0, sound = 0;
    for (const auto& [time, bad] : {std::pair{p.out_of_place_seconds, p.out_of_place_outlier},
                                    std::pair{p.in_place_seconds, p.in_place_outlier}}) {
      if (!time) continue;
      ++measured;
      if (bad) continue;
      ++sound;
      sum += *time;
    }
    p.weight = static_cast<double>(sound) / measured;
    if (sound > 0) p.seconds = sum / sound;
  }
}

}  // namespace loom::calibration::nccl_fit
