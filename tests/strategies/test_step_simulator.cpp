// One simulated training step: bubble fractions through the real engine, memory by schedule,
// symmetric vs full mode, and the Chrome trace written by `loom simulate --trace`.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "models/model_loader.hpp"
#include "strategies/step_simulator.hpp"
#include "topologies/cluster_presets.hpp"

using namespace loom;
using namespace loom::strategies;

namespace {

// A deep MLP of identical layers (8192 x 8192, 32 layers) with an 8-class head, so that
// every pipeline stage carries the same work (the textbook setting of the bubble formulas).
models::ModelSpec identical_mlp() {
  return models::parse_model_json(
      R"({"kind": "mlp", "name": "mlp-8k-x32", "width": 8192, "depth": 32, "classes": 8})", "test");
}

models::TrainingPlan plan_for(models::Schedule schedule, int pp, int dp, int vpp, int m,
                              std::int64_t mbs = 1024) {
  models::TrainingPlan p;
  p.pp = pp;
  p.dp = dp;
  p.vpp = vpp;
  p.mbs = mbs;
  p.gbs = mbs * dp * m;
  p.schedule = schedule;
  return p;
}

topo::Cluster dgx_a100(int nodes) {
  return topo::load_cluster(topo::ClusterRequest{"dgx-a100", nodes, std::nullopt});
}

}  // namespace

TEST_CASE("strategies::StepSimulator: ideal-network bubble matches the schedule formulas") {
  // Narayanan et al. 2021, Sec. 2.2: GPipe and 1F1B bubble (p-1)/(m+p-1); interleaved
  // (p-1)/(v·m+p-1). Qi et al. 2023: ZB-H1 below 1F1B.
  const auto model = identical_mlp();
  const auto cluster = dgx_a100(1);
  SimulateOptions o;
  o.network = sim::NetworkMode::IDEAL;
  const int p = 8, m = 16;
  const double textbook = double(p - 1) / (m + p - 1);
  for (auto kind : {models::Schedule::GPIPE, models::Schedule::ONE_F_ONE_B}) {
    auto r = simulate_step(model, plan_for(kind, p, 1, 1, m), cluster, o);
    CHECK(r.bubble_fraction == doctest::Approx(textbook).epsilon(0.01));
  }
  auto il = simulate_step(model, plan_for(models::Schedule::INTERLEAVED, p, 1, 2, m), cluster, o);
  CHECK(il.bubble_fraction == doctest::Approx(double(p - 1) / (2 * m + p - 1)).epsilon(0.01));
  auto zb = simulate_step(model, plan_for(models::Schedule::ZERO_BUBBLE, p, 1, 1, m), cluster, o);
  auto ofob = simulate_step(model, plan_for(models::Schedule::ONE_F_ONE_B, p, 1, 1, m), cluster, o);
  CHECK(zb.bubble_fraction < ofob.bubble_fraction);
  CHECK(zb.step_time_s < ofob.step_time_s);
}

TEST_CASE("strategies::StepSimulator: GPipe holds more activations than 1F1B") {
  // GPipe keeps all m micro-batches in flight; 1F1B at most p - stage (Narayanan 2021).
  const auto model = models::load_model("gpt-1.7b");
  const auto cluster = dgx_a100(1);
  SimulateOptions o;
  o.network = sim::NetworkMode::IDEAL;
  models::TrainingPlan g;
  g.pp = 4;
  g.dp = 2;
  g.mbs = 1;
  g.gbs = 32;
  g.schedule = models::Schedule::GPIPE;
  auto ofob_plan = g;
  ofob_plan.schedule = models::Schedule::ONE_F_ONE_B;
  auto rg = simulate_step(model, g, cluster, o);
  auto r1 = simulate_step(model, ofob_plan, cluster, o);
  for (size_t s = 0; s < rg.memory.stages.size(); ++s)
    CHECK(rg.memory.stages[s].activations_bytes > r1.memory.stages[s].activations_bytes);
  CHECK(rg.memory.peak_bytes > r1.memory.peak_bytes);
}

TEST_CASE("strategies::StepSimulator: symmetric and full modes agree on a homogeneous cluster") {
  const auto model = models::load_model("gpt-1.7b");
  const auto cluster = dgx_a100(2);
  models::TrainingPlan p;
  p.tp = 2;
  p.pp = 2;
  p.dp = 4;
  p.mbs = 1;
  p.gbs = 32;
  p.seq = 1024;
  for (auto mode : {sim::NetworkMode::ANALYTICAL, sim::NetworkMode::FLOW}) {
    SimulateOptions sym, full;
    sym.network = full.network = mode;
    full.full = true;
    auto a = simulate_step(model, p, cluster, sym);
    auto b = simulate_step(model, p, cluster, full);
    CHECK(b.simulated_gpus == 16);
    CHECK(a.simulated_gpus == 2);
    CHECK(a.step_time_s == doctest::Approx(b.step_time_s).epsilon(0.01));
  }
}

TEST_CASE("strategies::StepSimulator: a TP group leaving its NVLink domain is slower") {
  const auto model = models::load_model("gpt-7.5b");
  const auto cluster = dgx_a100(2);
  models::TrainingPlan in, out;
  in.tp = 8;
  in.dp = 2;
  in.seq = 1024;
  in.gbs = 8;
  out = in;
  out.tp = 16;
  out.dp = 1;
  auto a = simulate_step(model, in, cluster, {});
  auto b = simulate_step(model, out, cluster, {});
  // TP16 halves each GPU's compute but its all-reduces cross InfiniBand.
  // (2.5x: NCCL's tuner runs Tree/LL128 across the 2 nodes at these sizes, sim/nccl_model.hpp.)
  CHECK(b.comm_time_s[0] > 2.5 * a.comm_time_s[0]);
}

TEST_CASE("strategies::StepSimulator: report fields are consistent") {
  const auto model = models::load_model("gpt-1.7b");
  const auto cluster = dgx_a100(1);
  models::TrainingPlan p;
  p.tp = 2;
  p.pp = 2;
  p.dp = 2;
  p.gbs = 16;
  p.recompute = models::Recompute::FULL;
  auto r = simulate_step(model, p, cluster, {});
  CHECK(r.step_time_s > 0);
  // Full recompute: hardware FLOPs = 4/3 of model FLOPs (Narayanan Eq. 3 vs 72·...).
  CHECK(r.hardware_tflops_per_gpu / r.model_tflops_per_gpu ==
        doctest::Approx(4.0 / 3).epsilon(0.02));
  CHECK(r.mfu < r.hfu);
  CHECK(r.hfu < 1.0);
  CHECK(r.tokens_per_s == doctest::Approx(16.0 * 2048 / r.step_time_s));
  CHECK(r.bubble_fraction > 0);
  CHECK(r.comm_time_s[0] > 0);  // tp
  CHECK(r.comm_time_s[3] > 0);  // pp
  CHECK(r.comm_time_s[4] > 0);  // dp
}

TEST_CASE("strategies::StepSimulator: the trace is valid Chrome-trace JSON") {
  const std::string path = "/tmp/loom_test_trace.json";
  const std::string cmd = std::string(LOOM_BINARY) +
                          " simulate --model gpt-1.7b --cluster dgx-a100 --tp 2 --pp 2 --gbs 8 "
                          "--seq 512 --trace " +
                          path + " > /dev/null";
  REQUIRE(std::system(cmd.c_str()) == 0);
  std::ifstream in(path);
  const auto doc = nlohmann::json::parse(in);
  REQUIRE(doc.contains("traceEvents"));
  int slices = 0, counters = 0;
  std::map<std::pair<int, int>, double> last_end;
  for (const auto& e : doc["traceEvents"]) {
    REQUIRE(e.contains("ph"));
    REQUIRE(e.contains("pid"));
    const std::string ph = e["ph"];
    if (ph == "X") {
      ++slices;
      CHECK(e["name"].is_string());
      CHECK(e["ts"].is_number());
      CHECK(e["dur"].get<double>() >= 0);
      // One tid per serial stream: slices on a track never overlap (in start order).
      auto key = std::make_pair(e["pid"].get<int>(), e["tid"].get<int>());
      const double ts = e["ts"], dur = e["dur"];
      if (last_end.count(key)) CHECK(ts >= last_end[key] - 1e-3);
      last_end[key] = ts + dur;
    } else if (ph == "C") {
      ++counters;
      CHECK(e["args"]["bytes"].get<double>() > 0);
    } else {
      CHECK(ph == "M");
    }
  }
  CHECK(slices > 10);
  CHECK(counters > 0);
  std::remove(path.c_str());
}
