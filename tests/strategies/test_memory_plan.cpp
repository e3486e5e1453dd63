// In-flight micro-batches come from the pipeline schedule only; here they are checked
// against the published closed formulas they must reproduce.
#include <doctest/doctest.h>

#include <algorithm>

#include "common/error.hpp"
#include "models/model_loader.hpp"
#include "strategies/memory_plan.hpp"

using namespace loom;
using models::Schedule;

TEST_CASE("strategies::MemoryPlan: schedule-derived in-flight counts match the closed forms") {
  models::TrainingPlan p;
  p.pp = 8;
  p.gbs = 64;
  // 1F1B: stage r holds min(p - r, m) (Narayanan et al. 2021 Sec 2.2); GPipe all m
  // (Huang et al. 2019); naive one.
  for (int m : {2, 8, 64}) {
    p.gbs = m;
    p.schedule = Schedule::ONE_F_ONE_B;
    auto f = strategies::in_flight_micro_batches(p);
    for (int r = 0; r < p.pp; ++r) CHECK(f[r] == std::min(p.pp - r, m));
    p.schedule = Schedule::GPIPE;
    f = strategies::in_flight_micro_batches(p);
    for (int r = 0; r < p.pp; ++r) CHECK(f[r] == m);
  }
  p.schedule = Schedule::NAIVE;
  CHECK(strategies::in_flight_micro_batches(p)[0] == 1);
  // Interleaved: min(2 (p - r - 1) + (v - 1) p + 1, m v) / v chunks' worth (Megatron-LM
  // theoretical_memory_usage.py); first stage (1 + (p - 1)/(p v)) p.
  p.schedule = Schedule::INTERLEAVED;
  p.vpp = 3;
  p.gbs = 64;
  const auto f = strategies::in_flight_micro_batches(p);
  CHECK(f[0] == doctest::Approx(8 * (1 + 7.0 / (8 * 3))));
  for (int r = 0; r < p.pp; ++r)
    CHECK(f[r] == doctest::Approx(std::min(2.0 * (8 - r - 1) + 2 * 8 + 1, 64.0 * 3) / 3));
}

TEST_CASE("strategies::MemoryPlan: the estimate uses the schedule's counts") {
  const models::ModelSpec m = models::model_preset("llama3-8b");
  models::TrainingPlan p;
  p.pp = 4;
  p.gbs = 16;
  p.schedule = Schedule::GPIPE;
  const models::MemoryReport r = strategies::estimate_memory(m, p);
  CHECK(r.stages[0].inflight_microbatches == 16);
  CHECK(r.stages[3].inflight_microbatches == 16);
  p.schedule = Schedule::ONE_F_ONE_B;
  CHECK(strategies::estimate_memory(m, p).stages[0].inflight_microbatches == 4);
  p.tp = 3;  // does not divide 32 heads: the plan error comes first
  CHECK_THROWS_AS(strategies::estimate_memory(m, p), ValidationError);
}
