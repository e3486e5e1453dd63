// Ring all-reduce of 1 GiB over 1,024 GPUs (128 DGX H100 nodes, rail-optimised fat-tree),
// every rank simulated, in flow mode (target < 0.1 s wall). Also without the repeated-step
// memo (every step's flows solved by progressive filling) and in analytical mode; and a
// contended mixed workload (64 concurrent all-reduces) with incremental vs full re-solves;
// issue 34's scaling cases (all-to-all pair by pair and by flow class, and a flat ring over
// every GPU, at several sizes).
#include <fmt/format.h>

#include <sys/resource.h>

#include <chrono>

#include "sim/engine.hpp"
#include "topologies/cluster_presets.hpp"

namespace {

void run(const loom::topo::Cluster& cluster, loom::sim::NetworkMode mode, bool memo,
         const char* name) {
  using namespace loom;
  auto t0 = std::chrono::steady_clock::now();
  sim::EngineOptions options;
  options.network = mode;
  options.memo = memo;
  sim::Engine engine(cluster, options);
  sim::CollectiveSpec spec;
  for (int r = 0; r < cluster.num_gpus(); ++r) spec.request.ranks.push_back(r);
  spec.request.bytes = 1024.0 * 1024 * 1024;
  spec.request.algorithm = sim::Algorithm::RING;
  auto task = engine.add_collective(spec);
  auto t1 = std::chrono::steady_clock::now();
  engine.run();
  auto t2 = std::chrono::steady_clock::now();
  const auto& sched = engine.schedule(task);
  double sim_s = sim::to_seconds(engine.finish(task));
  int n = cluster.num_gpus();
  fmt::print(
      "{}: wall {:.4f} s (lowering {:.4f} s + run {:.4f} s); {} phases x {} flows, "
      "{} flows delivered, {} rate solves ({} components, {} flows re-filled of {} active), "
      "{} memo hits; simulated {:.3f} ms, busbw {:.1f} GB/s (target < 0.1 s wall)\n",
      name, std::chrono::duration<double>(t2 - t0).count(),
      std::chrono::duration<double>(t1 - t0).count(),
      std::chrono::duration<double>(t2 - t1).count(), sched.phases.size(), sched.flows.size(),
      engine.network_stats().flows, engine.network_stats().rate_solves,
      engine.network_stats().components_solved, engine.network_stats().flows_resolved,
      engine.network_stats().active_at_solves, engine.network_stats().memo_hits, sim_s * 1e3,
      spec.request.bytes / sim_s / 1e9 * sim::bus_bandwidth_factor(spec.request.op, n));
}

// 64 concurrent ring all-reduces on overlapping groups: group g takes GPU g%8 (rail g%8) of
// 16 nodes spread over the fabric, so groups on one rail share its leaf and spine links;
// sizes 16-64 MiB, starts staggered by 10 us. Compares incremental and full re-solves.
void run_contended(const loom::topo::Cluster& cluster, bool incremental, const char* name) {
  using namespace loom;
  auto t0 = std::chrono::steady_clock::now();
  sim::EngineOptions options;
  options.incremental_rates = incremental;
  sim::Engine engine(cluster, options);
  const int nodes = cluster.num_gpus() / 8;
  std::vector<sim::TaskId> tasks;
  for (int g = 0; g < 64; ++g) {
    sim::StreamId s = engine.add_stream(fmt::format("g{}", g));
    auto delay = engine.add_compute(s, sim::to_sim_time(10e-6 * g), "delay");
    sim::CollectiveSpec spec;
    for (int j = 0; j < 16; ++j) spec.request.ranks.push_back(((g + 8 * j) % nodes) * 8 + g % 8);
    spec.request.bytes = (1 + g % 4) * 16.0 * 1024 * 1024;
    spec.request.algorithm = sim::Algorithm::RING;
    tasks.push_back(engine.add_collective(spec, {delay}));
  }
  auto t1 = std::chrono::steady_clock::now();
  engine.run();
  auto t2 = std::chrono::steady_clock::now();
  const auto& st = engine.network_stats();
  fmt::print(
      "{}: wall {:.4f} s (lowering {:.4f} s + run {:.4f} s); {} flows delivered, {} rate "
      "solves, {} components re-filled, {} flows re-filled of {} active at those solves "
      "({:.1f}%), {} memo hits; makespan {:.3f} ms\n",
      name, std::chrono::duration<double>(t2 - t0).count(),
      std::chrono::duration<double>(t1 - t0).count(),
      std::chrono::duration<double>(t2 - t1).count(), st.flows, st.rate_solves,
      st.components_solved, st.flows_resolved, st.active_at_solves,
      100.0 * static_cast<double>(st.flows_resolved) / static_cast<double>(st.active_at_solves),
      st.memo_hits, sim::to_seconds(engine.makespan()) * 1e3);
}

// Issue 34's scaling cases, each at two sizes so the growth shows: a 1 GiB all-to-all over
// every GPU (direct, PXN relays; transfers folded into distinct flows), and a flat ring
// all-reduce of 1 GiB over every GPU, both in flow mode; wall time, flows lowered (distinct
// entries, and the transfers they stand for) and peak memory of the process so far.
void run_scaling(loom::sim::CollectiveOp op, loom::sim::Algorithm algo, int nodes, const char* name,
                 bool classes = true) {
  using namespace loom;
  const auto cluster = topo::load_cluster({"dgx-h100", nodes, std::nullopt});
  auto t0 = std::chrono::steady_clock::now();
  sim::EngineOptions options;
  options.cost.flow_classes = classes;  // off: pair by pair (the all-to-all's flows folded)
  sim::Engine engine(cluster, options);
  sim::CollectiveSpec spec;
  for (int r = 0; r < cluster.num_gpus(); ++r) spec.request.ranks.push_back(r);
  spec.request.op = op;
  spec.request.bytes = 1024.0 * 1024 * 1024;
  spec.request.algorithm = algo;
  auto task = engine.add_collective(spec);
  engine.run();
  auto t1 = std::chrono::steady_clock::now();
  const auto& sched = engine.schedule(task);
  std::int64_t transfers = 0;
  for (const auto& f : sched.flows) transfers += std::int64_t{f.count} * f.copies;
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  fmt::print(
      "{}_{}gpu: wall {:.3f} s; {} flows lowered standing for {} transfers, {} phases; "
      "simulated {:.3f} ms; peak RSS so far {:.0f} MB\n",
      name, cluster.num_gpus(), std::chrono::duration<double>(t1 - t0).count(), sched.flows.size(),
      transfers, sched.phases.size(), sim::to_seconds(engine.finish(task)) * 1e3,
      u.ru_maxrss / 1024.0);
}

}  // namespace

int main() {
  using namespace loom;
  auto t0 = std::chrono::steady_clock::now();
  auto cluster = topo::load_cluster({"dgx-h100", 128, std::nullopt});
  auto t1 = std::chrono::steady_clock::now();
  fmt::print("cluster dgx-h100 x128: {} GPUs, {} vertices, {} directed links, built in {:.3f} s\n",
             cluster.num_gpus(), cluster.vertices().size(), cluster.links().size(),
             std::chrono::duration<double>(t1 - t0).count());
  run(cluster, sim::NetworkMode::FLOW, true, "ring_allreduce_1GiB_1024gpu_flow");
  run(cluster, sim::NetworkMode::ANALYTICAL, true, "ring_allreduce_1GiB_1024gpu_analytical");
  run(cluster, sim::NetworkMode::FLOW, false, "ring_allreduce_1GiB_1024gpu_flow_no_memo");
  run_contended(cluster, true, "contended_64_allreduces_flow_incremental");
  run_contended(cluster, false, "contended_64_allreduces_flow_full_resolve");
  // The all-to-all pair by pair (its distinct flows ~n^2/8) and by flow class (a fixed
  // number of classes on DGX nodes, issue 34 item 5).
  for (int nodes : {32, 64})
    run_scaling(sim::CollectiveOp::ALL_TO_ALL, sim::Algorithm::DIRECT, nodes,
                "all_to_all_1GiB_pairs", false);
  for (int nodes : {32, 64, 256, 512, 1024, 2048})
    run_scaling(sim::CollectiveOp::ALL_TO_ALL, sim::Algorithm::DIRECT, nodes,
                "all_to_all_1GiB_classes");
  for (int nodes : {512, 1024, 2048})
    run_scaling(sim::CollectiveOp::ALL_REDUCE, sim::Algorithm::RING, nodes,
                "flat_ring_allreduce_1GiB");
  return 0;
}
