// `loom plan`'s engine: GPU types and counts, one configuration's days, GPU-hours, energy and
// cost by hand, prices, and the --days / --budget choices.
#include <doctest/doctest.h>

#include <cmath>

#include "models/memory.hpp"
#include "models/model_loader.hpp"
#include "strategies/capacity/capacity.hpp"
#include "tests/source_path.hpp"
#include "topologies/cluster_presets.hpp"

using loom::testing::source_path;

using namespace loom;
using namespace loom::strategies;

namespace {

PlanInput tiny_input() {
  PlanInput in;
  in.sources() = PlanSources::command_line();
  in.set("gbs", std::int64_t{16});
  in.set("seq", std::int64_t{1024});
  return in;
}

CapacityRow row(std::size_t target, double days, std::optional<double> cost, double gpu_hours) {
  CapacityRow r;
  r.target = target;
  r.feasible = true;
  r.run.expected_s = days * 86400;
  r.cost = cost;
  r.gpu_hours = gpu_hours;
  return r;
}

}  // namespace

TEST_CASE("strategies::Capacity: GPU types resolve to their cluster presets") {
  const CapacityTarget h100 = resolve_target("h100");
  CHECK(h100.cluster_spec == "dgx-h100");
  CHECK(h100.gpu == "h100-sxm");
  CHECK(h100.gpus_per_node == 8);
  CHECK(h100.board_watts == 700);  // H100 SXM datasheet TDP
  CHECK(resolve_target("b200").cluster_spec == "dgx-b200");
  const CapacityTarget rack = resolve_target("gb200-nvl72");
  CHECK(rack.cluster_spec == "gb200-nvl72");
  CHECK(rack.gpus_per_node == 72);
  // Preset names match case-insensitively, as --cluster matches them; the label stays as given.
  const CapacityTarget upper = resolve_target("DGX-H100");
  CHECK(upper.cluster_spec == "DGX-H100");
  CHECK(upper.label == "DGX-H100");
  CHECK(upper.gpu == "h100-sxm");
  CHECK(upper.gpus_per_node == 8);
  const CapacityTarget file =
      resolve_target(source_path("examples/clusters/custom_4gpu_roce.json"));
  CHECK(file.gpus_per_node == 4);
  CHECK(file.gpu == "h100-sxm");
  CHECK_THROWS_WITH_AS(resolve_target("h1000", "--gpu"), doctest::Contains("did you mean"),
                       ValidationError);
  CHECK_THROWS_WITH_AS(resolve_target("mi300x", "--gpu"),
                       doctest::Contains("no cluster preset has mi300x GPUs"), ValidationError);
}

TEST_CASE("strategies::Capacity: GPU counts are whole nodes; the default sweep doubles nodes") {
  const CapacityTarget h100 = resolve_target("h100");
  CHECK(gpu_counts(h100, {1001, 1000, 8, 1000}) == std::vector<std::int64_t>{8, 1000, 1008});
  const auto sweep = gpu_counts(h100, {});
  CHECK(sweep.size() == 12);  // 8, 16, ..., 16,384
  CHECK(sweep.front() == 8);
  CHECK(sweep.back() == 16384);
  const CapacityTarget rack = resolve_target("gb200-nvl72");
  CHECK(gpu_counts(rack, {1024}) == std::vector<std::int64_t>{1080});  // 15 racks of 72
  CHECK(gpu_counts(rack, {}).back() == 72 * 128);                      // 9,216 <= 16,384
}

TEST_CASE("strategies::Capacity: one configuration's days, GPU-hours, energy and cost by hand") {
  const models::ModelSpec model = models::load_model(source_path("examples/models/tiny-gpt.json"));
  const CapacityTarget a100 = resolve_target("a100");
  CapacityOptions o;
  o.tokens = 1e9;
  o.goodput.failures_per_gpu_hour = 0;  // no failures: expected = ideal
  o.pue = 1.2;
  o.search.top = 1;
  o.search.exact = 2;
  const CapacityRow r = plan_configuration(model, tiny_input(), a100, 8, o, 1.5);
  REQUIRE(r.feasible);
  CHECK(r.nodes == 1);
  // The row's plan, simulated on its own, takes the row's step time.
  const topo::Cluster cluster = topo::load_cluster(topo::ClusterRequest{"dgx-a100", 1, {}});
  const StepReport again = simulate_step(model, r.plan, cluster, o.search.simulate);
  CHECK(again.step_time_s == r.step_time_s);
  // 16 sequences x 1,024 tokens per step.
  CHECK(r.tokens_per_s == doctest::Approx(16 * 1024 / r.step_time_s));
  CHECK(r.run.ideal_s == doctest::Approx(1e9 / r.tokens_per_s));
  CHECK(r.run.expected_s == r.run.ideal_s);
  CHECK(r.gpu_hours == doctest::Approx(8 * r.run.ideal_s / 3600));
  // A100 SXM 400 W x 8 GPUs x seconds x PUE 1.2.
  CHECK(r.energy_joules == doctest::Approx(400.0 * 8 * r.run.ideal_s * 1.2));
  REQUIRE(r.cost.has_value());
  CHECK(*r.cost == doctest::Approx(1.5 * r.gpu_hours));
  // bf16 with Adam: 2 B weights + 4 B fp32 master + 8 B moments per parameter.
  CHECK(r.checkpoint_bytes == doctest::Approx(models::count_parameters(model).total * 14));

  // With failures the same plan takes longer, by the goodput model's factor.
  CapacityOptions failing = o;
  failing.goodput.failures_per_gpu_hour = 0.01;
  const CapacityRow f = plan_configuration(model, tiny_input(), a100, 8, failing);
  REQUIRE(f.feasible);
  CHECK(f.run.expected_s > f.run.ideal_s);
  CHECK(f.gpu_hours == doctest::Approx(8 * f.run.expected_s / 3600));
  CHECK_FALSE(f.cost.has_value());
}

TEST_CASE("strategies::Capacity: a count without a fitting plan is a row with its reason") {
  const models::ModelSpec model = models::load_model("llama3-70b");
  CapacityOptions o;
  o.tokens = 1e12;
  o.search.top = 1;
  o.search.exact = 1;
  PlanInput in = tiny_input();
  in.set("mbs", std::int64_t{1});
  in.set("zero", std::int64_t{1});
  const CapacityRow r = plan_configuration(model, in, resolve_target("h100"), 8, o);
  CHECK_FALSE(r.feasible);
  CHECK(r.failure == ExitCode::INFEASIBLE);
  CHECK(r.reason.find("fits") != std::string::npos);
}

TEST_CASE("strategies::Capacity: prices match GPU types by name, key or alias") {
  const std::vector<CapacityTarget> targets = {resolve_target("h100"), resolve_target("b200")};
  auto p = resolve_prices(targets, {{"h100-sxm", "2.10"}, {"b200", "4"}});
  CHECK(p[0] == 2.10);
  CHECK(p[1] == 4.0);
  p = resolve_prices(targets, {{"H100", "3"}});
  CHECK(p[0] == 3.0);
  CHECK_FALSE(p[1].has_value());
  CHECK_THROWS_WITH_AS(resolve_prices(targets, {{"h200", "2"}}, "--price"),
                       doctest::Contains("not one of the GPU types planned (h100, b200)"),
                       ValidationError);
  CHECK_THROWS_WITH_AS(resolve_prices(targets, {{"h100", "2"}, {"h100-sxm", "3"}}, "--price"),
                       doctest::Contains("a second price for h100"), ValidationError);
  CHECK_THROWS_AS(resolve_prices(targets, {{"h100", "two"}}), ValidationError);
  CHECK_THROWS_AS(resolve_prices(targets, {{"h100", "-1"}}), ValidationError);
}

TEST_CASE("strategies::Capacity: --days picks the cheapest in time, --budget the fastest") {
  std::vector<CapacityRow> rows = {
      row(0, 40, 1.0e6, 500000),  // cheapest, too slow for 30 days
      row(0, 25, 1.5e6, 600000),  // in time
      row(1, 20, 1.2e6, 700000),  // in time, cheaper
      row(1, 10, 3.0e6, 900000),  // fastest, dearest
  };
  rows.push_back(row(1, 5, 0.5e6, 100));
  rows.back().feasible = false;  // never chosen
  CHECK(cheapest_within(rows, 30, false) == 2u);
  CHECK(cheapest_within(rows, 30, true) == 1u);  // fewest GPU-hours in time
  CHECK(cheapest_within(rows, 50, false) == 0u);
  CHECK_FALSE(cheapest_within(rows, 5, false).has_value());
  CHECK(fastest_within(rows, 2.0e6) == 2u);  // 20 days beats 25 and 40
  CHECK(fastest_within(rows, 1.2e6) == 2u);
  CHECK(fastest_within(rows, 1.1e6) == 0u);
  CHECK(fastest_within(rows, 1e7) == 3u);
  CHECK_FALSE(fastest_within(rows, 0.9e6).has_value());
}
