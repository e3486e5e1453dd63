// Engine throughput on a synthetic chain: N compute tasks, each depending on the previous,
// alternating between two streams (so every task start goes through dependency release and
// stream hand-over). Prints events per second of run() (target >= 10 M/s).
#include <fmt/format.h>

#include <chrono>

#include "sim/engine.hpp"
#include "topologies/cluster.hpp"

int main() {
  using namespace loom;
  topo::Cluster cluster;
  cluster.add_vertex({topo::VertexKind::GPU, "gpu0", 0, 0, false});
  const int n = 5'000'000;
  sim::EngineOptions options;
  options.network = sim::NetworkMode::IDEAL;
  sim::Engine engine(cluster, options);
  sim::StreamId s[2] = {engine.add_stream("a"), engine.add_stream("b")};
  auto t0 = std::chrono::steady_clock::now();
  sim::TaskId prev = engine.add_compute(s[0], 1000, "");
  for (int i = 1; i < n; ++i) prev = engine.add_compute(s[i % 2], 1000 + i % 7, "", {prev});
  auto t1 = std::chrono::steady_clock::now();
  engine.run();
  auto t2 = std::chrono::steady_clock::now();
  double build_s = std::chrono::duration<double>(t1 - t0).count();
  double run_s = std::chrono::duration<double>(t2 - t1).count();
  fmt::print("engine_chain_tasks: {}\n", n);
  fmt::print("engine_events: {}\n", engine.events_processed());
  fmt::print("engine_build_time: {:.3f} s\n", build_s);
  fmt::print("engine_run_time: {:.3f} s\n", run_s);
  fmt::print("engine_events_per_s: {:.1f} M events/s (target >= 10 M/s)\n",
             engine.events_processed() / run_s / 1e6);
  fmt::print("engine_makespan: {} ps\n", engine.makespan());
  return 0;
}
