// DeepSpeed's pipeline engine: blocking transfers meet the receiver (strategies/step/
// pipe_engine.hpp; deepspeed/runtime/pipe/schedule.py TrainSchedule, p2p.py).
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "models/model_loader.hpp"
#include "strategies/step_simulator.hpp"
#include "topologies/cluster_presets.hpp"

using namespace loom;
using namespace loom::strategies;

namespace {

struct Checked {
  int transfers = 0;
  int after_receiver = 0;  // started after the receiver's pass before the consuming one
  int sender_waited = 0;   // the sender's next pass started after the transfer ended
};

// Every pipeline transfer of a 2-stage run against the compute slices of its two stages.
Checked check_transfers(models::Framework framework) {
  const auto model = models::model_preset("gpt-1.7b");
  const auto cluster = topo::load_cluster(topo::ClusterRequest{"dgx-a100", 1, std::nullopt});
  models::TrainingPlan plan;
  plan.tp = 4;
  plan.pp = 2;
  plan.mbs = 1;
  plan.gbs = 4;  // four micro-batches
  plan.schedule = models::Schedule::ONE_F_ONE_B;
  plan.framework = framework;
  SimulateOptions o;
  o.network = sim::NetworkMode::ANALYTICAL;
  o.keep_timeline = true;
  const auto r = simulate_step(model, plan, cluster, o);
  // Compute passes per stage in start order ("F mb3 c0 ...", "B mb0 c0 ...").
  std::vector<std::vector<const TimelineSlice*>> passes(2);
  for (const auto& s : r.timeline) {
    if (s.stream != "compute" || (s.name.rfind("F mb", 0) != 0 && s.name.rfind("B mb", 0) != 0))
      continue;
    for (int st = 0; st < 2; ++st)
      if (s.rank == r.stage_ranks[static_cast<size_t>(st)])
        passes[static_cast<size_t>(st)].push_back(&s);
  }
  for (auto& v : passes)
    std::sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->start_s < b->start_s; });
  auto index_of = [&](int st, const std::string& prefix) {
    const auto& v = passes[static_cast<size_t>(st)];
    for (size_t i = 0; i < v.size(); ++i)
      if (v[i]->name.rfind(prefix, 0) == 0) return static_cast<long>(i);
    return -1L;
  };
  Checked c;
  constexpr double EPS = 1e-9;
  for (const auto& s : r.timeline) {
    const bool act = s.name.rfind("send-act mb", 0) == 0;
    if (!act && s.name.rfind("send-grad mb", 0) != 0) continue;
    if (s.rank != r.stage_ranks[act ? 0 : 1]) continue;  // the sender's slice
    const int mb = std::stoi(s.name.substr(act ? 11 : 12));
    const std::string pass = (act ? "F mb" : "B mb") + std::to_string(mb) + " ";
    const int from = act ? 0 : 1, to = act ? 1 : 0;
    ++c.transfers;
    const long consumer = index_of(to, pass), sent = index_of(from, pass);
    REQUIRE(consumer >= 0);
    REQUIRE(sent >= 0);
    if (consumer == 0 ||
        s.start_s + EPS >=
            passes[static_cast<size_t>(to)][static_cast<size_t>(consumer - 1)]->end_s)
      ++c.after_receiver;
    const auto& mine = passes[static_cast<size_t>(from)];
    if (static_cast<size_t>(sent + 1) >= mine.size() ||
        mine[static_cast<size_t>(sent + 1)]->start_s + EPS >= s.end_s)
      ++c.sender_waited;
  }
  return c;
}

}  // namespace

TEST_CASE("strategies::DeepSpeedEngine: a pipeline transfer waits for the receiver to post") {
  // 1F1B on 2 stages, 4 micro-batches: stage 0 runs F0 F1 B0 F2 B1 F3 B2 B3, stage 1 F0 B0
  // F1 B1 F2 B2 F3 B3. Under DeepSpeed every transfer starts once the receiver finished the
  // pass before the one that consumes it, and the sender's next pass waits for it to end.
  const Checked ds = check_transfers(models::Framework::DEEPSPEED);
  CHECK(ds.transfers == 2 * 4);  // one activation and one gradient per micro-batch
  CHECK(ds.after_receiver == ds.transfers);
  CHECK(ds.sender_waited == ds.transfers);
  // Megatron's scheduler sends ahead: F1's activations leave stage 0 while stage 1 still
  // runs B0.
  const Checked mg = check_transfers(models::Framework::MEGATRON);
  CHECK(mg.transfers == ds.transfers);
  CHECK(mg.after_receiver < mg.transfers);
}
