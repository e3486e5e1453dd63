// Fuzz target: a cluster JSON file, then routing between the first and the last GPU, the
// NVLink domains and the bisection and injection bandwidths `loom topo` prints. Legal but large
// clusters (up to 65,536 nodes) take seconds to build by design, so inputs asking for more than 16
// nodes or 64 spines are skipped: the fuzzer looks for crashes, not for slow legal work.
#include <nlohmann/json.hpp>

#include "tests/fuzz/fuzz_target.hpp"
#include "topologies/cluster_builder.hpp"

namespace {

bool too_large(const std::string& text) {
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (!doc.is_object()) return false;
  const auto above = [&](const nlohmann::json& v, double limit) {
    return v.is_number() && v.get<double>() > limit;
  };
  if (doc.contains("nodes") && above(doc["nodes"], 16)) return true;
  const auto fabric = doc.find("fabric");
  return fabric != doc.end() && fabric->is_object() && fabric->contains("spines") &&
         above((*fabric)["spines"], 64);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = loom::fuzz::text_of(data, size);
  if (too_large(text)) return 0;
  return loom::fuzz::guarded([&] {
    const loom::topo::Cluster cluster = loom::topo::parse_cluster_json(
        text, "fuzz-cluster.json", [](int) { return std::optional<int>(); }, std::nullopt, {});
    (void)cluster.route_ranks(0, cluster.num_gpus() - 1);
    (void)cluster.num_nvlink_domains();
    (void)cluster.bisection_bandwidth_Bps();
    (void)cluster.injection_bandwidth_Bps(0);
  });
}
