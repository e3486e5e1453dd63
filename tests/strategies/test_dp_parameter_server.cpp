// Parameter servers (dp_mode ps): the server-NIC bound, scaling in workers and servers,
// update rules against a straggler, staleness, and GEO's volume.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "common/error.hpp"
#include "models/model_loader.hpp"
#include "models/model_spec.hpp"
#include "strategies/plan/plan_rules.hpp"
#include "strategies/step_simulator.hpp"
#include "tests/source_path.hpp"
#include "topologies/cluster_presets.hpp"

using loom::testing::source_path;

using namespace loom;
using namespace loom::strategies;

namespace {

models::ModelSpec tiny_gpt() {
  return models::load_model(source_path("examples/models/tiny-gpt.json"));
}

// dgx-h100 nodes plus `hosts` CPU servers (one IB NDR NIC each) on the fabric.
topo::Cluster h100_with_hosts(int nodes, int hosts) {
  topo::ClusterRequest r{"dgx-h100", nodes, std::nullopt};
  r.hosts = hosts;
  return topo::load_cluster(r);
}

models::TrainingPlan ps_plan(int workers, int servers, const char* update = "sync") {
  models::TrainingPlan p;
  p.dp = workers;
  p.mbs = 1;
  p.seq = 1024;
  p.grad_dtype = models::GradDtype::BF16;  // pushes and pulls both 2 B per parameter
  p.dp_mode = models::DpMode::PS;
  p.ps_servers = servers;
  const std::string u = update;
  if (u == "async") p.ps_update = models::PsUpdate::ASYNC;
  if (u.rfind("ssp:", 0) == 0) {
    p.ps_update = models::PsUpdate::SSP;
    p.ps_update_bound = std::stoi(u.substr(4));
  }
  if (u.rfind("geo:", 0) == 0) {
    p.ps_update = models::PsUpdate::GEO;
    p.ps_update_bound = std::stoi(u.substr(4));
  }
  return p;
}

}  // namespace

TEST_CASE("strategies::ParameterServer: sync step is server-NIC bound, 2 P W / (S B)") {
  // tiny-gpt: P = 124.44M parameters x 2 B = 248.9 MB pushed and pulled by each worker per
  // step. A server's path: CPU - PCIe Gen5 x16 (63.0 GB/s x 0.76 = 47.9 GB/s) - NIC - IB NDR
  // (50 GB/s x 0.94 payload = 47.0 GB/s): B = 47.0 GB/s each way. Every worker pulls P/S from
  // each server, then pushes P/S: each server sends W P / S and then receives W P / S, so
  // T_comm = 2 P W / (S B). W = 16, S = 1: 2 x 248.9e6 x 16 / 47e9 = 169.4 ms; compute is
  // 4.0 ms (one 1024-token micro-batch on an H100) and the last unit's apply a few ms, so
  // step = max(compute, T_comm) + optimizer tail, within 5% of T_comm here. The pulls finish
  // together (max-min fair shares), so the forward starts after them: the compute adds to
  // the communication rather than hiding under it (the formula's max is the overlapped
  // ideal; loom's first step has no previous step to overlap with).
  const auto model = tiny_gpt();
  const double P = 124.44e6 * 2, B = 47.0e9;
  auto step = [&](int nodes, int servers) {
    return simulate_step(model, ps_plan(8 * nodes, servers), h100_with_hosts(nodes, 4), {});
  };
  const StepReport w16s1 = step(2, 1);
  const double t_comm = 2 * P * 16 / (1 * B);
  CHECK(w16s1.step_time_s == doctest::Approx(t_comm).epsilon(0.05));
  CHECK(w16s1.step_time_s > t_comm);  // never faster than the server NIC allows
  // Linear in W once server-bound: 32 workers take twice as long (within 2%).
  const StepReport w32s1 = step(4, 1);
  CHECK(w32s1.step_time_s / w16s1.step_time_s == doctest::Approx(2.0).epsilon(0.02));
  // More servers, less time: S = 2 halves it, S = 4 quarters it (within 3%).
  CHECK(step(2, 2).step_time_s / w16s1.step_time_s == doctest::Approx(0.5).epsilon(0.03));
  CHECK(step(2, 4).step_time_s / w16s1.step_time_s == doctest::Approx(0.25).epsilon(0.05));
  // Ring all-reduce (DDP) moves 2 (W - 1) / W x P per GPU over every GPU's NIC at once: far
  // less than the one server's W P each way. 16 GPUs: 2 x 15/16 x 248.9 MB / 47 GB/s = 9.9 ms
  // of inter-node traffic at most (NCCL also splits it over 8 rails); PS with S = 1: 169 ms.
  models::TrainingPlan ddp = ps_plan(16, 1);
  ddp.dp_mode = models::DpMode::DDP;
  const StepReport ring = simulate_step(model, ddp, h100_with_hosts(2, 4), {});
  CHECK(ring.step_time_s < 2 * 2 * 15.0 / 16 * P / B);
  CHECK(w16s1.step_time_s > 10 * ring.step_time_s);
  // Volume: every worker moves 2 P per step.
  CHECK(w16s1.design.ps_bytes_per_worker_step == doctest::Approx(2 * P).epsilon(1e-3));
}

TEST_CASE("strategies::ParameterServer: async beats sync with a 1.5x straggler; SSP between") {
  // 8 workers on one DGX H100, 8 CPU servers; rank 3 computes 1.5x slower. A compute-heavy
  // step (8 sequences of 1024 tokens) so that compute c sets the pace. Sync: every step
  // waits for the straggler, 8 / (1.5 c) steps' worth of samples per second. Async: 7
  // workers at 1 / c and one at 1 / (1.5 c): (7 + 2/3) / c, 1.44x sync's rate (less, as
  // the servers' and NICs' share of each step is the same for both). SSP with bound 2 lets
  // fast workers run ahead only 2 steps: over 12 steps, between the two.
  const auto model = tiny_gpt();
  const auto cluster = h100_with_hosts(1, 8);
  SimulateOptions o;
  o.steps = 12;
  o.stragglers = {{3, 1.5}};
  auto run = [&](const char* update) {
    models::TrainingPlan p = ps_plan(8, 8, update);
    p.mbs = 8;
    return simulate_step(model, p, cluster, o);
  };
  const StepReport sync = run("sync"), async = run("async"), ssp = run("ssp:2");
  CHECK(async.tokens_per_s > sync.tokens_per_s);
  const double gain = async.tokens_per_s / sync.tokens_per_s;
  CHECK(gain > 1.2);
  CHECK(gain < (7 + 2.0 / 3) / (8 / 1.5) * 1.01);
  CHECK(ssp.tokens_per_s > sync.tokens_per_s);
  CHECK(ssp.tokens_per_s < async.tokens_per_s);
  // Staleness: sync gradients are never stale; async ones lag by about the other workers'
  // updates applied during one step (up to 7), one histogram entry per gradient (8 x 12).
  REQUIRE(sync.design.staleness_histogram.size() == 1);
  CHECK(sync.design.staleness_histogram[0] == 8 * 12);
  std::int64_t gradients = 0;
  for (auto n : async.design.staleness_histogram) gradients += n;
  CHECK(gradients == 8 * 12);
  CHECK(async.design.staleness_mean > 1.0);
  CHECK(async.design.staleness_mean <= 8.0);
  // The straggler's own steps are the slowest.
  double slowest = 0;
  int slowest_rank = -1;
  for (const auto& r : async.replicas) {
    if (r.mean_step_s <= slowest) continue;
    slowest = r.mean_step_s;
    slowest_rank = r.rank;
  }
  CHECK(slowest_rank == 3);
  CHECK(async.steps.times_s.size() == 12);
}

TEST_CASE("strategies::ParameterServer: GEO moves 1/k of sync's bytes") {
  // GEO with k = 4 pushes a parameter delta and pulls the parameters every 4th step: over
  // 12 steps 3 pushes and 3 pulls of P each (and the first step's pull counts as one of
  // them) against sync's 12 and 12: exactly 1/4 of the volume.
  const auto model = tiny_gpt();
  const auto cluster = h100_with_hosts(1, 2);
  SimulateOptions o;
  o.steps = 12;
  const StepReport sync = simulate_step(model, ps_plan(8, 2), cluster, o);
  const StepReport geo = simulate_step(model, ps_plan(8, 2, "geo:4"), cluster, o);
  CHECK(geo.design.ps_bytes_per_worker_step ==
        doctest::Approx(sync.design.ps_bytes_per_worker_step / 4).epsilon(1e-9));
  CHECK(geo.tokens_per_s > sync.tokens_per_s);
}

TEST_CASE("strategies::ParameterServer: tensor round-robin leaves the embedding's server busiest") {
  // Dealing whole tensors: the 38.6M-parameter embedding table lands on one server, which
  // then carries more than 1/S of the bytes; byte ranges balance every server exactly.
  const auto model = tiny_gpt();
  const auto cluster = h100_with_hosts(2, 4);
  models::TrainingPlan bytes = ps_plan(16, 4), tensor = ps_plan(16, 4);
  tensor.ps_shard = models::PsShard::TENSOR;
  const StepReport b = simulate_step(model, bytes, cluster, {});
  const StepReport t = simulate_step(model, tensor, cluster, {});
  CHECK(t.step_time_s > b.step_time_s);
  // Server memory: equal under bytes, unequal under tensor.
  REQUIRE(b.design.device_memory.size() == 5);  // the worker, then 4 servers
  CHECK(b.design.device_memory[1].second == doctest::Approx(b.design.device_memory[4].second));
  double lo = 1e30, hi = 0;
  for (size_t i = 1; i < t.design.device_memory.size(); ++i) {
    lo = std::min(lo, t.design.device_memory[i].second);
    hi = std::max(hi, t.design.device_memory[i].second);
  }
  CHECK(hi > 1.5 * lo);
}

TEST_CASE("strategies::ParameterServer: servers on GPUs, and the rules") {
  const auto model = tiny_gpt();
  models::TrainingPlan p = ps_plan(16, 2);
  p.ps_placement = models::PsPlacement::GPU;
  const StepReport r = simulate_step(model, p, h100_with_hosts(2, 0), {});
  CHECK(r.simulated_gpus == 16);
  // A server on a GPU applies its shard from HBM (3.35 TB/s), faster than one on a host
  // from DRAM (460.8 GB/s): the busiest server's apply time shrinks.
  const StepReport on_hosts = simulate_step(model, ps_plan(16, 2), h100_with_hosts(2, 2), {});
  const auto apply_s = [](const StepReport& s) {
    for (const auto& [phase, seconds] : s.design.breakdown)
      if (phase.rfind("server apply", 0) == 0) return seconds;
    return -1.0;
  };
  CHECK(apply_s(r) > 0);
  CHECK(apply_s(r) < apply_s(on_hosts));
  // Host servers need hosts.
  CHECK_THROWS_WITH_AS(
      simulate_step(model, ps_plan(16, 2), h100_with_hosts(2, 1), {}),
      doctest::Contains("ps_servers: 2 servers on hosts need 2 hosts, but the cluster has 1"),
      PlanError);
  // Whole model per worker: no tensor parallelism.
  models::TrainingPlan tp = ps_plan(8, 1);
  tp.tp = 2;
  CHECK_THROWS_WITH_AS(validate_plan(model, tp, 16),
                       "tp: dp_mode ps replicates the whole model on every GPU, so it needs tp 1 "
                       "(got 2); use dp_mode ddp for model parallelism",
                       PlanError);
}
