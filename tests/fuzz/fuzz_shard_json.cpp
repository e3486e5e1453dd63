// Fuzz target: a partial search result (`loom search --merge FILE`), read as the merge reads it
// (tally_from_json against the search's space) and, when it is read, checked row by row as the
// merge checks it (verify_tally: candidates of its shard, keys recomputed). The search is the
// GPT 1.7B preset on one DGX A100 (gbs 16, seq 1024), as in tests/strategies/test_search.cpp.
// With LOOM_FUZZ_WRITE_SEED=FILE set, the target first writes shard 0/2 of that search to FILE:
// scripts/fuzz seeds the corpus with it, so the fuzzer starts from a tally that is accepted.
#include <cstdlib>
#include <fstream>

#include "models/model_loader.hpp"
#include "strategies/search/search.hpp"
#include "tests/fuzz/fuzz_target.hpp"
#include "topologies/cluster_presets.hpp"

namespace {

using namespace loom;

struct Search {
  models::ModelSpec model = models::load_model("gpt-1.7b");
  topo::Cluster cluster = topo::load_cluster(topo::ClusterRequest{"dgx-a100", 1, std::nullopt});
  strategies::SearchSpace space{model, input(), 8};
  strategies::SearchOptions options = make_options();

  static strategies::PlanInput input() {
    strategies::PlanInput in;
    in.sources() = strategies::PlanSources::command_line();
    in.set("gbs", std::int64_t{16});
    in.set("seq", std::int64_t{1024});
    return in;
  }
  static strategies::SearchOptions make_options() {
    strategies::SearchOptions o;
    o.top = 3;
    o.exact = 6;
    o.sample = 4;
    o.threads = 1;
    return o;
  }
};

const Search& search() {
  static const Search s;
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* path = std::getenv("LOOM_FUZZ_WRITE_SEED")) {
    const Search& s = search();
    const strategies::SearchTally part =
        strategies::fast_tier(s.model, s.space, s.cluster, s.options, {0, 2});
    std::ofstream(path) << strategies::tally_to_json(part, s.space);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return loom::fuzz::guarded([&] {
    const Search& s = search();
    const strategies::SearchTally tally =
        strategies::tally_from_json(loom::fuzz::text_of(data, size), "fuzz.json", s.space);
    strategies::verify_tally(s.model, s.space, s.cluster, s.options, tally, {0, 2}, "fuzz.json");
  });
}
