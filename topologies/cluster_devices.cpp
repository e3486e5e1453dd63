// The parts of a cluster that make devices differ: hosts that hold ranks (parameter
// servers), the GPU type of each rank (node groups of different GPUs), and links slowed by
// hand or by a seeded random model (degraded cables or ports).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/error.hpp"
#include "common/seeded_draw.hpp"
#include "topologies/cluster.hpp"

namespace loom::topo {

void Cluster::add_host(VertexId cpu) {
  if (cpu < 0 || cpu >= static_cast<VertexId>(vertices_.size()) ||
      vertices_[static_cast<size_t>(cpu)].kind != VertexKind::CPU) {
    throw ValidationError("host", fmt::format("vertex {} is not a CPU; a host rank lives on a "
                                              "CPU vertex",
                                              cpu));
  }
  if (std::find(hosts_.begin(), hosts_.end(), cpu) != hosts_.end()) {
    throw ValidationError("host", fmt::format("CPU '{}' holds a host rank already",
                                              vertices_[static_cast<size_t>(cpu)].name));
  }
  hosts_.push_back(cpu);
}

VertexId Cluster::host_vertex(int h) const {
  if (h < 0 || h >= num_hosts()) {
    throw ValidationError("host", fmt::format("host {} is out of range; this cluster has {} "
                                              "host{}",
                                              h, num_hosts(), num_hosts() == 1 ? "" : "s"));
  }
  return hosts_[static_cast<size_t>(h)];
}

void Cluster::set_gpu_types(std::vector<GpuSpec> types, std::vector<int> rank_type) {
  if (!rank_type.empty() && static_cast<int>(rank_type.size()) != num_gpus()) {
    throw ValidationError("gpu", fmt::format("{} GPU types given for {} ranks; give one per rank",
                                             rank_type.size(), num_gpus()));
  }
  for (int k : rank_type) {
    if (k < 0 || k > static_cast<int>(types.size()))
      throw ValidationError("gpu", fmt::format("GPU type {} does not exist", k));
  }
  extra_gpus_ = std::move(types);
  rank_type_ = std::move(rank_type);
}

int Cluster::gpu_type_of_rank(int rank) const {
  gpu_vertex(rank);  // throws when out of range
  return rank_type_.empty() ? 0 : rank_type_[static_cast<size_t>(rank)];
}

const GpuSpec& Cluster::gpu_type(int k) const {
  if (k == 0) return gpu;
  if (k < 0 || k > static_cast<int>(extra_gpus_.size()))
    throw ValidationError("gpu", fmt::format("GPU type {} does not exist", k));
  return extra_gpus_[static_cast<size_t>(k - 1)];
}

void Cluster::slow_link(LinkId link, double factor) {
  if (link < 0 || link >= static_cast<LinkId>(links_.size())) {
    throw ValidationError("link", fmt::format("link {} does not exist", link));
  }
  if (!(factor >= 1) || !std::isfinite(factor)) {
    throw ValidationError(
        "link", fmt::format("a slow link's factor must be a number >= 1, got {}", factor));
  }
  const auto first = static_cast<size_t>(link - link % 2);  // duplex: ids 2k and 2k + 1
  links_[first].bandwidth_Bps /= factor;
  links_[first + 1].bandwidth_Bps /= factor;
  invalidate();  // derived figures (injection, bisection) read the bandwidths
}

std::vector<std::pair<LinkId, double>> slow_random_links(Cluster& cluster, double fraction,
                                                         double mean_factor, std::uint64_t seed) {
  if (!(fraction >= 0 && fraction <= 1) || !(mean_factor >= 1) || !std::isfinite(mean_factor)) {
    throw ValidationError("slow_link",
                          fmt::format("random slow links: fraction {} must be in [0, 1] and mean "
                                      "factor {} a number >= 1",
                                      fraction, mean_factor));
  }
  std::vector<std::pair<LinkId, double>> out;
  const auto& links = cluster.links();
  for (size_t l = 0; l < links.size(); l += 2) {
    const bool from_node = cluster.vertex(links[l].from).node >= 0;
    if (from_node == (cluster.vertex(links[l].to).node >= 0)) continue;  // not a scale-out link
    const auto key = static_cast<std::uint64_t>(l);
    if (uniform_draw(seed, key, 0, 2) >= fraction) continue;
    const double f = 1.0 + exponential_draw(mean_factor - 1.0, seed, key, 0, 3);
    cluster.slow_link(static_cast<LinkId>(l), f);
    out.emplace_back(static_cast<LinkId>(l), f);
  }
  return out;
}

}  // namespace loom::topo
