// Builds a 2,048-node (16,384-GPU) DGX H100 cluster on a rail-optimised fat-tree and routes
// a ring over all GPUs (rank r -> r+1); prints build and routing wall time and peak RSS.
// Target: routing the ring in under 1 s.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "topologies/cluster_presets.hpp"

int main(int argc, char** argv) {
  const int nodes = argc > 1 ? std::atoi(argv[1]) : 2048;
  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  loom::topo::Cluster c = loom::topo::load_cluster({"dgx-h100", nodes, {}});
  auto t1 = Clock::now();
  const int n = c.num_gpus();
  std::size_t hops = 0;
  double min_bw = 1e30;
  for (int r = 0; r < n; ++r) {
    auto p = c.route_ranks(r, (r + 1) % n);
    hops += p.links.size();
    min_bw = std::min(min_bw, p.bandwidth_Bps);
  }
  auto t2 = Clock::now();
  double bisection = c.bisection_bandwidth_Bps();
  auto t3 = Clock::now();
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto s = [](auto d) { return std::chrono::duration<double>(d).count(); };
  std::printf("cluster: %s, %d GPUs, %zu vertices, %zu directed links\n", c.name.c_str(), n,
              c.vertices().size(), c.links().size());
  std::printf("build + finalize: %.3f s\n", s(t1 - t0));
  std::printf("ring routes: %d in %.3f s (%.2f us/route), %zu hops, min bandwidth %.1f GB/s\n", n,
              s(t2 - t1), s(t2 - t1) / n * 1e6, hops, min_bw / 1e9);
  std::printf("bisection (max-flow): %.1f GB/s in %.3f s\n", bisection / 1e9, s(t3 - t2));
  std::printf("peak RSS: %.1f MiB\n", static_cast<double>(usage.ru_maxrss) / 1024.0);
  return 0;
}
