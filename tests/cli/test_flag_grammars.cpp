// The small flag grammars loom parses itself (cli/flag_grammars.hpp, simulate's scenario flags):
// what issue 34's audit found accepted or unbounded, refused with the flag named.
#include <doctest/doctest.h>

#include <string>

#include "cli/flag_grammars.hpp"
#include "cli/simulate_scenarios.hpp"
#include "common/error.hpp"
#include "common/limits.hpp"
#include "topologies/cluster_presets.hpp"

using namespace loom;

namespace {

strategies::SimulateOptions stragglers(const std::string& value) {
  cli::ScenarioFlags flags;
  flags.stragglers = {value};
  topo::Cluster cluster = topo::load_cluster(topo::ClusterRequest{"dgx-h100", 1, std::nullopt});
  strategies::SimulateOptions options;
  cli::apply_scenario_flags(flags, cluster, options);
  return options;
}

}  // namespace

TEST_CASE("cli::flag_grammars: --straggler takes decimal factors only") {
  CHECK(stragglers("3=1.5").stragglers.at(3) == 1.5);
  CHECK(stragglers("3=2e0").stragglers.at(3) == 2.0);
  // std::stod read these: hexadecimal, leading blanks.
  for (const char* bad : {"3=0x10", "0x3=2", "3= 2", " 3=2", "3=inf", "3=nan", "3=2x"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(stragglers(bad), doctest::Contains("--straggler"), ValidationError);
  }
}

TEST_CASE("cli::flag_grammars: --group ranges are bounded before they expand") {
  CHECK(cli::parse_group("0-3,8-11").size() == 8);
  // Each range alone is within the per-range bound; together they would hold 2^21 ranks.
  std::string many;
  for (int i = 0; i < 4; ++i) many += (i ? "," : "") + std::string("0-524287");
  CHECK_THROWS_WITH_AS(cli::parse_group(many), doctest::Contains("MAX_CLUSTER_GPUS"),
                       ValidationError);
  // A long list of single ranks counts the same way (the generator: MAX_CLUSTER_GPUS + 1 of them).
  std::string singles;
  for (int i = 0; i <= MAX_CLUSTER_GPUS; ++i) singles += "1,";
  singles += "1";
  CHECK_THROWS_WITH_AS(cli::parse_group(singles), doctest::Contains("--group"), ValidationError);
}

TEST_CASE("cli::flag_grammars: --tokens") {
  CHECK(cli::parse_tokens("15T") == 15e12);
  CHECK(cli::parse_tokens("2.5e12") == 2.5e12);
  for (const char* bad : {"", "T", "-1T", "1e30", "0x10", "15 T", "inf"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(cli::parse_tokens(bad), doctest::Contains("--tokens"), ValidationError);
  }
}
