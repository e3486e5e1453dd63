// `loom simulate`'s scenario flags: --compare's plan, stragglers, slow links.
#include <doctest/doctest.h>

#include "cli/simulate_scenarios.hpp"
#include "common/error.hpp"
#include "topologies/cluster_presets.hpp"

using namespace loom;
using namespace loom::cli;

TEST_CASE("cli::SimulateScenarios: --compare sets one plan flag by its type") {
  PlanFlags base;
  base.texts["dp_mode"] = "ps";
  base.integers["ps_servers"] = 4;
  const PlanFlags ddp = compare_flags(base, "dp-mode=ddp");
  CHECK(ddp.texts.at("dp_mode") == "ddp");
  CHECK(ddp.integers.count("ps_servers") == 0);  // parameter-server settings go with ps
  CHECK(compare_flags(base, "zero=1").integers.at("zero") == 1);
  CHECK(compare_flags(base, "tp=2").integers.at("tp") == 2);
  CHECK(compare_flags(base, "sp=on").switches.at("sp") == 1);
  CHECK(compare_flags(base, "dp-bucket-size=40MB").texts.at("dp_bucket_size") == "40MB");
  // Sizes take the binary suffixes their flag takes (--seq 8k).
  CHECK(compare_flags(base, "seq=8k").integers.at("seq") == 8192);
  CHECK(compare_flags(base, "seq=4096").integers.at("seq") == 4096);
  for (const char* bad : {"dp-mod=ddp", "zero", "tp=1.5", "sp=yes", "micro-batches=2", "seq=8x"})
    CHECK_THROWS_WITH_AS(compare_flags(base, bad), doctest::Contains("--compare"), ValidationError);
}

TEST_CASE("cli::SimulateScenarios: stragglers, slow links and steps reach the options") {
  ScenarioFlags f;
  f.steps = 3;
  f.stragglers = {"3=1.5,5=2", "7=1.25"};
  f.straggler_random = "0.1:1.5";
  f.seed = 9;
  f.slow_links = {"node0/nic0:leaf0=4"};
  f.host_launch = "20us";
  auto cluster = topo::load_cluster({"dgx-h100", 2, std::nullopt});
  const double before =
      cluster.route(cluster.find_vertex("node0/nic0"), cluster.find_vertex("leaf0")).bandwidth_Bps;
  strategies::SimulateOptions o;
  apply_scenario_flags(f, cluster, o);
  CHECK(o.steps == 3);
  CHECK(o.stragglers == std::map<int, double>{{3, 1.5}, {5, 2.0}, {7, 1.25}});
  CHECK(o.random_stragglers.fraction == 0.1);
  CHECK(o.random_stragglers.mean_factor == 1.5);
  CHECK(o.random_stragglers.seed == 9);
  CHECK(o.host_launch_s == doctest::Approx(20e-6).scale(0));
  CHECK(cluster.route(cluster.find_vertex("node0/nic0"), cluster.find_vertex("leaf0"))
            .bandwidth_Bps == doctest::Approx(before / 4));
  const std::pair<const char*, const char*> bad[] = {{"--straggler", "3"},
                                                     {"--straggler", "x=2"},
                                                     {"--straggler", "99=2"},
                                                     {"--slow-link", "leaf0=2"},
                                                     {"--slow-link", "node0/gpu0:leaf0=2"},
                                                     {"--straggler-random", "2:1.5"}};
  for (const auto& [flag, value] : bad) {
    ScenarioFlags g;
    if (std::string(flag) == "--straggler") g.stragglers = {value};
    if (std::string(flag) == "--slow-link") g.slow_links = {value};
    if (std::string(flag) == "--straggler-random") g.straggler_random = value;
    auto c = topo::load_cluster({"dgx-h100", 2, std::nullopt});
    strategies::SimulateOptions opts;
    CHECK_THROWS_WITH_AS(apply_scenario_flags(g, c, opts), doctest::Contains(flag),
                         ValidationError);
  }
}
