// Pipeline schedules as data: shapes, deadlock-freedom, and the textbook bubble fractions
// replayed with a tiny unit-time evaluator (zero communication).
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "common/error.hpp"
#include "strategies/schedule.hpp"

using loom::models::Schedule;
using namespace loom::strategies;

namespace {

// Replays the per-stage orders with F = 1/v, B = 2/v (or Bi = W = 1/v) time units per chunk,
// zero communication; returns the makespan. Times are scaled by v so they stay integers.
double makespan(const PipelineSchedule& s, int f_units = 1, int b_units = 2) {
  const int p = s.stages, vs_count = p * s.chunks;
  std::map<std::tuple<int, int, int>, long> done;  // (kind 0=F 1=B 2=W, mb, vs) -> end
  std::vector<long> clock(p, 0);
  std::vector<size_t> cursor(p, 0);
  bool progress = true;
  while (progress) {
    progress = false;
    for (int st = 0; st < p; ++st) {
      while (cursor[st] < s.per_stage[st].size()) {
        const Pass& x = s.per_stage[st][cursor[st]];
        const int vs = s.virtual_stage(st, x.chunk);
        std::vector<std::tuple<int, int, int>> deps;
        long dur = f_units;
        int kind = 0;
        if (x.kind == PassKind::FORWARD) {
          if (vs > 0) deps.emplace_back(0, x.micro_batch, vs - 1);
        } else if (x.kind == PassKind::BACKWARD_WEIGHT) {
          kind = 2;
          dur = b_units / 2;
          deps.emplace_back(1, x.micro_batch, vs);
        } else {
          kind = 1;
          dur = x.kind == PassKind::BACKWARD ? b_units : b_units / 2;
          deps.emplace_back(0, x.micro_batch, vs);
          if (vs < vs_count - 1) deps.emplace_back(1, x.micro_batch, vs + 1);
        }
        long start = clock[st];
        bool ready = true;
        for (auto& d : deps) {
          auto it = done.find(d);
          if (it == done.end()) {
            ready = false;
            break;
          }
          start = std::max(start, it->second);
        }
        if (!ready) break;
        clock[st] = start + dur;
        done[{kind, x.micro_batch, vs}] = clock[st];
        ++cursor[st];
        progress = true;
      }
    }
  }
  // Durations above are per chunk in units of 1/v of a full stage pass.
  return static_cast<double>(*std::max_element(clock.begin(), clock.end())) / s.chunks;
}

// Bubble fraction: idle share of the makespan with per-stage work m·(F+B) = 3m.
double bubble(const PipelineSchedule& s) {
  const double t = makespan(s);
  return (t - 3.0 * s.micro_batches) / t;
}

}  // namespace

TEST_CASE("strategies::Schedule: GPipe and 1F1B bubble is (p-1)/(m+p-1)") {
  // GPipe (Huang et al. 2019) and 1F1B (Narayanan et al. 2021, Sec. 2.2.1): bubble time
  // (p−1)(t_f+t_b) over the step (m+p−1)(t_f+t_b).
  for (auto kind : {Schedule::GPIPE, Schedule::ONE_F_ONE_B}) {
    for (auto [p, m] : {std::pair{4, 8}, {8, 16}, {4, 4}, {2, 7}, {8, 3}}) {
      auto s = build_schedule(kind, p, m, 1);
      CHECK(bubble(s) == doctest::Approx(double(p - 1) / (m + p - 1)));
    }
  }
}

TEST_CASE("strategies::Schedule: interleaved bubble is (p-1)/(v*m+p-1)") {
  // Narayanan et al. 2021, Sec. 2.2.2: the interleaved schedule divides the bubble by v.
  for (auto [p, m, v] : {std::tuple{4, 8, 2}, {8, 16, 4}, {4, 12, 3}, {2, 4, 2}}) {
    auto s = build_schedule(Schedule::INTERLEAVED, p, m, v);
    CHECK(bubble(s) == doctest::Approx(double(p - 1) / (v * m + p - 1)));
  }
}

TEST_CASE("strategies::Schedule: zero-bubble ZB-H1 is strictly below 1F1B") {
  // Qi et al. 2023, Sec. 3.1: with T_F = T_Bi = T_W the ZB-H1 bubble is (p−1)·T_F, a third of
  // 1F1B's (p−1)(T_F + T_B) with T_B = T_Bi + T_W.
  for (auto [p, m] : {std::pair{4, 8}, {8, 16}, {4, 4}, {8, 32}}) {
    auto zb = build_schedule(Schedule::ZERO_BUBBLE, p, m, 1);
    auto ofob = build_schedule(Schedule::ONE_F_ONE_B, p, m, 1);
    CHECK(makespan(zb) < makespan(ofob));
    CHECK(makespan(zb) == doctest::Approx(3.0 * m + (p - 1)));
    CHECK(makespan(ofob) == doctest::Approx(3.0 * m + 3.0 * (p - 1)));
    // Same activation bound as 1F1B: at most p − s micro-batches between F and Bi.
    for (int st = 0; st < p; ++st) CHECK(peak_in_flight(zb, st) <= p - st);
  }
}

TEST_CASE("strategies::Schedule: naive runs one micro-batch at a time") {
  auto s = build_schedule(Schedule::NAIVE, 4, 5, 1);
  // Every micro-batch crosses the whole pipeline twice: 5 · 4 · (1 + 2) units.
  CHECK(makespan(s) == doctest::Approx(5.0 * 4 * 3));
}

TEST_CASE("strategies::Schedule: activations in flight, GPipe holds all, 1F1B at most p - s") {
  auto gpipe = build_schedule(Schedule::GPIPE, 4, 16, 1);
  auto ofob = build_schedule(Schedule::ONE_F_ONE_B, 4, 16, 1);
  for (int st = 0; st < 4; ++st) {
    CHECK(peak_in_flight(gpipe, st) == 16);
    CHECK(peak_in_flight(ofob, st) == 4 - st);
  }
}

TEST_CASE("strategies::Schedule: every pass appears once per stage") {
  for (auto kind :
       {Schedule::NAIVE, Schedule::GPIPE, Schedule::ONE_F_ONE_B, Schedule::ZERO_BUBBLE}) {
    auto s = build_schedule(kind, 4, 8, 1);
    for (const auto& order : s.per_stage)
      CHECK(order.size() == (kind == Schedule::ZERO_BUBBLE ? 24u : 16u));
  }
  auto s = build_schedule(Schedule::INTERLEAVED, 4, 8, 3);
  for (const auto& order : s.per_stage) CHECK(order.size() == 2u * 8 * 3);
}

TEST_CASE("strategies::Schedule: the checker rejects a deadlocking order") {
  PipelineSchedule s;
  s.kind = Schedule::ONE_F_ONE_B;
  s.stages = 2;
  s.micro_batches = 1;
  s.chunks = 1;
  // Stage 0 wants the backward before its own forward ran: it would wait forever.
  s.per_stage = {{{PassKind::BACKWARD, 0, 0}, {PassKind::FORWARD, 0, 0}},
                 {{PassKind::FORWARD, 0, 0}, {PassKind::BACKWARD, 0, 0}}};
  CHECK_THROWS_AS(check_deadlock_free(s), loom::InternalError);
  s.per_stage[0] = {{PassKind::FORWARD, 0, 0}};  // missing backward
  CHECK_THROWS_AS(check_deadlock_free(s), loom::InternalError);
}

TEST_CASE("strategies::Schedule: invalid shapes are validation errors") {
  CHECK_THROWS_AS(build_schedule(Schedule::INTERLEAVED, 4, 6, 2), loom::ValidationError);
  CHECK_THROWS_AS(build_schedule(Schedule::INTERLEAVED, 4, 8, 1), loom::ValidationError);
  CHECK_THROWS_AS(build_schedule(Schedule::ONE_F_ONE_B, 4, 8, 2), loom::ValidationError);
  CHECK_THROWS_WITH_AS(build_schedule(Schedule::INTERLEAVED, 4, 6, 2),
                       doctest::Contains("multiple of the 4 stages"), loom::ValidationError);
}
