// DeepSpeed's optimizer and parameter offload (plan.offload_optimizer / offload_param): the
// GPU's memory drops by exactly the optimizer and partition bytes that move to the host, the
// host holds them, and the step pays the CPU Adam step (CPU_ADAM_PARAMS_PER_S shared by a
// node's GPUs) and the copies over each GPU's link to its CPU, counted by hand.
#include <doctest/doctest.h>

#include <algorithm>
#include <limits>

#include "models/model_loader.hpp"
#include "sim/fabric.hpp"
#include "strategies/memory_plan.hpp"
#include "strategies/search/fast_estimate.hpp"
#include "strategies/step/lower_passes.hpp"
#include "strategies/step/zero_offload.hpp"
#include "strategies/step_simulator.hpp"
#include "topologies/cluster_presets.hpp"

using namespace loom;
using namespace loom::strategies;

namespace {

models::TrainingPlan zero_plan(int zero, int dp = 8) {
  models::TrainingPlan p;
  p.dp = dp;
  p.zero = zero;
  p.seq = 1024;
  p.mbs = 1;
  p.gbs = dp;  // one micro-batch
  p.framework = models::Framework::DEEPSPEED;
  if (zero == 3) p.fsdp_impl = models::FsdpImpl::DEEPSPEED;
  return p;
}

// Payload bytes per second of GPU 0's path to its nearest CPU (its bottleneck link).
double host_link_Bps(const topo::Cluster& c) {
  const topo::VertexId gpu = c.gpu_vertex(0);
  const topo::Path path = c.route(gpu, nearest_cpu(c, gpu));
  double bw = std::numeric_limits<double>::infinity();
  const sim::LinkEfficiency eff;
  for (topo::LinkId l : path.links)
    bw = std::min(bw, c.link(l).bandwidth_Bps * eff.of(c.link(l).kind));
  return bw;
}

}  // namespace

TEST_CASE("strategies::ZeroOffload: ZeRO-2 offload moves the optimizer and gradient partition") {
  const auto model = models::model_preset("llama3-8b");
  const models::TrainingPlan base = zero_plan(2);
  models::TrainingPlan off = base;
  off.offload_optimizer = models::Offload::CPU;
  const models::MemoryReport a = estimate_memory(model, base);
  const models::MemoryReport b = estimate_memory(model, off);
  const models::StageMemory& s = b.stages[0];
  const double partition = s.parameters / 8;  // dp 8, no experts
  // On the host: fp32 master + Adam's two moments (12 B) and the fp32 gradient (4 B).
  CHECK(s.host_optimizer_bytes == doctest::Approx(12 * partition));
  CHECK(s.host_gradient_bytes == doctest::Approx(4 * partition));
  CHECK(s.host_param_bytes == 0);
  CHECK(b.peak_host_bytes == doctest::Approx(16 * partition));
  // Off the GPU: the optimizer column and the gradient partition (fp32 main grads, 4 B).
  CHECK(s.optimizer_bytes == 0);
  CHECK(a.stages[0].optimizer_bytes == doctest::Approx(12 * partition));
  CHECK(a.stages[0].gradients_bytes - s.gradients_bytes == doctest::Approx(4 * partition));
  CHECK(s.weights_bytes == doctest::Approx(a.stages[0].weights_bytes));
  CHECK(a.peak_bytes - b.peak_bytes == doctest::Approx(16 * partition).epsilon(1e-6));
  // With gradient accumulation ZeRO-1/2 keep a 16-bit buffer per partition element too.
  off.gbs = 32;
  CHECK(estimate_memory(model, off).stages[0].host_gradient_bytes ==
        doctest::Approx(6 * partition));
  // ZeRO-1 keeps its full gradients on the GPU.
  models::TrainingPlan one = zero_plan(1);
  const double grads1 = estimate_memory(model, one).stages[0].gradients_bytes;
  one.offload_optimizer = models::Offload::CPU;
  CHECK(estimate_memory(model, one).stages[0].gradients_bytes == doctest::Approx(grads1));
}

TEST_CASE("strategies::ZeroOffload: ZeRO-3 parameter offload moves the 16-bit partition") {
  const auto model = models::model_preset("llama3-8b");
  const models::TrainingPlan base = zero_plan(3);
  models::TrainingPlan off = base;
  off.offload_optimizer = models::Offload::CPU;
  off.offload_param = models::Offload::CPU;
  const models::StageMemory a = estimate_memory(model, base).stages[0];
  const models::StageMemory b = estimate_memory(model, off).stages[0];
  const double partition = b.parameters / 8;
  CHECK(b.host_param_bytes == doctest::Approx(2 * partition));
  CHECK(a.weights_bytes - b.weights_bytes == doctest::Approx(2 * partition));
  CHECK(b.zero3_buffer_bytes == doctest::Approx(a.zero3_buffer_bytes));  // gathers stay
  // The gradient partition (4 B fp32 main grads) leaves for the host's accumulation buffer,
  // beside the fp32 gradient the CPU step reads.
  CHECK(a.gradients_bytes - b.gradients_bytes == doctest::Approx(4 * partition));
  CHECK(b.host_gradient_bytes == doctest::Approx((4 + 4) * partition));
  CHECK(b.host_optimizer_bytes == doctest::Approx(12 * partition));
}

TEST_CASE("strategies::ZeroOffload: the step pays CPU Adam and the PCIe copies") {
  const auto model = models::model_preset("llama3-8b");
  const auto cluster = topo::load_cluster(topo::ClusterRequest{"dgx-h100", 1, std::nullopt});
  models::TrainingPlan base = zero_plan(2);
  base.overlap_grad_reduce = true;
  models::TrainingPlan off = base;
  off.offload_optimizer = models::Offload::CPU;
  off.offload_pin_memory = true;
  const StepReport a = simulate_step(model, base, cluster);
  const StepReport b = simulate_step(model, off, cluster);
  const double partition = b.memory.stages[0].parameters / 8;
  // DeepSpeedCPUAdam: 11.6e9 parameters in 8.2 s per node, eight GPUs' processes at once.
  const double adam = partition * 8 / (11.6e9 / 8.2);
  CHECK(cpu_adam_seconds(partition, 8) == doctest::Approx(adam));
  CHECK(b.optimizer_time_s == doctest::Approx(adam).epsilon(1e-3));
  CHECK(b.zero_offload);
  CHECK_FALSE(a.zero_offload);
  // fp32 gradients to the host, the fp32 partition back: 4 + 4 B per partition element.
  CHECK(b.offload_bytes_per_gpu == doctest::Approx(8 * partition).epsilon(1e-3));
  const double link = host_link_Bps(cluster);
  CHECK(b.offload_copy_s >= 8 * partition / link * 0.999);
  // The CPU step and the copy back follow the last reduction: the step grows by at least them.
  CHECK(b.step_time_s - a.step_time_s >= adam + 4 * partition / link - a.optimizer_time_s);
  // Pageable buffers stage each copy through a host memcpy (2 B per byte at a GPU's share of
  // the host's memory bandwidth, slower here than its PCIe link): the copies and the step take
  // longer.
  models::TrainingPlan pageable = off;
  pageable.offload_pin_memory = false;
  const StepReport c = simulate_step(model, pageable, cluster);
  CHECK(host_staging_Bps(cluster, {}) > 0);
  CHECK(2 / host_staging_Bps(cluster, {}) > 1 / link);
  CHECK(c.step_time_s > b.step_time_s);
  CHECK(c.offload_copy_s > b.offload_copy_s);
  // The fast tier charges the same CPU step and copies.
  FastEstimator fast(model, cluster);
  CHECK(fast.step_time_s(off) - fast.step_time_s(base) >= adam);
  CHECK(fast.peak_memory_bytes(off) < fast.peak_memory_bytes(base));
}

TEST_CASE("strategies::ZeroOffload: no data parallelism, and ZeRO-3 fetching parameters") {
  const auto model = models::model_preset("llama3-8b");
  const auto cluster = topo::load_cluster(topo::ClusterRequest{"dgx-h100", 1, std::nullopt});
  // ZeRO-Offload over a data-parallel group of one (tp 8): the whole gradient goes down at
  // once after the backward, the whole update comes back.
  models::TrainingPlan single = zero_plan(2, 1);
  single.tp = 8;
  single.offload_optimizer = models::Offload::CPU;
  single.offload_pin_memory = true;
  const StepReport r = simulate_step(model, single, cluster);
  const double params = r.memory.stages[0].parameters;
  CHECK(r.offload_bytes_per_gpu == doctest::Approx(8 * params).epsilon(1e-3));
  CHECK(r.optimizer_time_s == doctest::Approx(cpu_adam_seconds(params, 8)).epsilon(1e-3));
  // ZeRO-3 with both offloads: every all-gather's partition comes from the host first (2 B
  // per element), the reduce-scatter's partition goes to it (2 B, one micro-batch), then as
  // fp32 (4 B); the update stays on the host.
  models::TrainingPlan z3 = zero_plan(3);
  z3.offload_optimizer = models::Offload::CPU;
  z3.offload_pin_memory = true;
  const StepReport opt_only = simulate_step(model, z3, cluster);
  const double partition = opt_only.memory.stages[0].parameters / 8;
  // The optimizer offload alone: 2 + 4 B down, the 16-bit partition (2 B) back.
  CHECK(opt_only.offload_bytes_per_gpu == doctest::Approx(8 * partition).epsilon(0.01));
  z3.offload_param = models::Offload::CPU;
  const StepReport both = simulate_step(model, z3, cluster);
  // The update stays on the host (2 B less); every gathered use (each unit's forward, and its
  // backward where DeepSpeed re-gathers it) fetches 2 B per partition element of it: more than
  // the forward's (norms persist, never gathered), less than twice it.
  const double fetched =
      both.offload_bytes_per_gpu - (opt_only.offload_bytes_per_gpu - 2 * partition);
  CHECK(fetched > 0.95 * 2 * partition);
  CHECK(fetched < 2 * 2 * partition);
  CHECK(both.step_time_s > opt_only.step_time_s);
}
