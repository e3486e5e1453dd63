// Fuzz target: the grammars of single flag values that loom parses itself (issue 34 item 11).
// The first byte picks the flag, the rest is its value, given to the parser the command uses:
// --tokens, --group, --straggler, --straggler-random, --slow-link, --slow-link-random,
// --host-launch (applied to a one-node cluster and checked as `simulate` checks them),
// --compare and --pipeline-split.
#include "cli/flag_grammars.hpp"
#include "cli/simulate_scenarios.hpp"
#include "strategies/plan/plan_resolve.hpp"
#include "strategies/step_simulator.hpp"
#include "tests/fuzz/fuzz_target.hpp"
#include "topologies/cluster_presets.hpp"

namespace {

using namespace loom;

// One DGX H100: every vertex name a --slow-link can reach, eight ranks for --straggler.
const topo::Cluster& one_node() {
  static const topo::Cluster cluster =
      topo::load_cluster(topo::ClusterRequest{"dgx-h100", 1, std::nullopt});
  return cluster;
}

void scenario(int which, const std::string& value) {
  cli::ScenarioFlags flags;
  if (which == 2) flags.stragglers = {value};
  if (which == 3) flags.straggler_random = value;
  if (which == 4) flags.slow_links = {value};
  if (which == 5) flags.slow_link_random = value;
  if (which == 6) flags.host_launch = value;
  topo::Cluster cluster = one_node();
  strategies::SimulateOptions options;
  cli::apply_scenario_flags(flags, cluster, options);
  strategies::check_simulate_options(options, cluster.num_gpus());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const int which = data[0] % 9;
  const std::string value = loom::fuzz::text_of(data + 1, size - 1);
  return loom::fuzz::guarded([&] {
    switch (which) {
      case 0:
        (void)cli::parse_tokens(value);
        break;
      case 1:
        (void)cli::parse_group(value);
        break;
      case 7:
        (void)cli::compare_flags(cli::PlanFlags{}, value);
        break;
      case 8:
        (void)strategies::parse_layer_list(value);
        break;
      default:
        scenario(which, value);
    }
  });
}
