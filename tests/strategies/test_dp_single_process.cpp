// Single-process DataParallel (dp_mode dataparallel) against DDP on one node.
#include <doctest/doctest.h>

#include <string>

#include "common/error.hpp"
#include "models/model_loader.hpp"
#include "strategies/plan/plan_rules.hpp"
#include "strategies/step_simulator.hpp"
#include "tests/source_path.hpp"
#include "topologies/cluster_presets.hpp"

using loom::testing::source_path;

using namespace loom;
using namespace loom::strategies;

namespace {

double phase(const StepReport& r, const std::string& what) {
  for (const auto& [name, s] : r.design.breakdown)
    if (name.rfind(what, 0) == 0) return s;
  return -1;
}

}  // namespace

TEST_CASE(
    "strategies::SingleProcess: DataParallel is slower than DDP on 8 GPUs, GPU 0 holds more") {
  // GPT-2 medium (355M parameters), 8 x H100 of one DGX, 4 sequences of 1024 tokens per GPU.
  // Per forward call DataParallel broadcasts P = 355M x 2 B = 0.71 GB from GPU 0, gathers
  // every replica's logits to GPU 0 (4 x 1024 x 50257 x 2 B = 412 MB each; 7 x 412 MB over
  // GPU 0's NVLink at 450 GB/s x 0.8 = 360 GB/s: 8.0 ms), runs the loss of all 8 there,
  // scatters the logits' gradient back (8.0 ms again) and reduces the gradients to GPU 0;
  // its forward kernels are launched one at a time by the one Python thread (at the host's time per
  // op each). DDP all-reduces the gradients, overlapping nothing of that. So DataParallel is
  // slower, and its breakdown shows each of those terms.
  const auto model = models::load_model(source_path("examples/models/gpt2-medium.json"));
  const auto cluster = topo::load_cluster({"dgx-h100", 1, std::nullopt});
  models::TrainingPlan p;
  p.dp = 8;
  p.mbs = 4;
  p.seq = 1024;
  models::TrainingPlan dp = p;
  dp.dp_mode = models::DpMode::DATAPARALLEL;
  const StepReport ddp = simulate_step(model, p, cluster, {});
  const StepReport single = simulate_step(model, dp, cluster, {});
  CHECK(single.step_time_s > 1.5 * ddp.step_time_s);
  CHECK(single.simulated_gpus == 8);
  for (const char* what : {"scatter (inputs)", "replicate", "kernel launches", "gather", "loss",
                           "reduce", "optimizer"})
    CHECK_MESSAGE(phase(single, what) > 0, what);
  CHECK(phase(single, "gather") ==
        doctest::Approx(7 * 4 * 1024 * 50257.0 * 2 / 360e9).epsilon(0.02));
  // The launches: every forward kernel of 8 replicas, one after another, each at the host's
  // time per op (the DGX H100's 13.48 us, TE issue #2053); a host twice as slow doubles them.
  SimulateOptions slow_host;
  slow_host.host_launch_s = 2 * 13.48e-6;
  const StepReport slower = simulate_step(model, dp, cluster, slow_host);
  CHECK(phase(slower, "kernel launches") == doctest::Approx(2 * phase(single, "kernel launches")));
  CHECK(slower.step_time_s > single.step_time_s);
  // Memory: GPU 0 holds the optimizer state and every replica's gathered output; the others
  // hold neither.
  REQUIRE(single.design.device_memory.size() == 2);
  const double gpu0 = single.design.device_memory[0].second;
  const double others = single.design.device_memory[1].second;
  CHECK(gpu0 > others + 355e6 * 12 * 0.9);  // at least the fp32 master + Adam states
  CHECK(single.memory.peak_bytes == doctest::Approx(gpu0));
  CHECK(gpu0 > ddp.memory.peak_bytes);
}

TEST_CASE("strategies::SingleProcess: DataParallel stays within one node") {
  const auto model = models::load_model(source_path("examples/models/gpt2-medium.json"));
  const auto cluster = topo::load_cluster({"dgx-h100", 2, std::nullopt});
  models::TrainingPlan p;
  p.dp = 16;
  p.dp_mode = models::DpMode::DATAPARALLEL;
  CHECK_THROWS_WITH_AS(simulate_step(model, p, cluster, {}),
                       "dp_mode: dataparallel drives the GPUs of one node (8) from one process, "
                       "but the plan spans 16 GPUs; use dp_mode ddp or one node",
                       PlanError);
  p.dp = 8;
  p.schedule = models::Schedule::GPIPE;
  CHECK_THROWS_WITH_AS(validate_plan(model, p, 8), doctest::Contains("use schedule 1f1b"),
                       PlanError);
}
