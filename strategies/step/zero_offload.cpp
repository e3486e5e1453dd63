// DeepSpeed's optimizer and parameter offload in the step (see zero_offload.hpp).
#include "strategies/step/zero_offload.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "models/plan_dtypes.hpp"
#include "strategies/step/dp_lowering.hpp"
#include "strategies/step/lower_passes.hpp"
#include "topologies/cluster_builder.hpp"

namespace loom::strategies {

using sim::TaskId;

const topo::HostSpec& node_host(const topo::Cluster& c) {
  static const topo::HostSpec fallback = topo::default_host();
  return c.host.memory_bandwidth_Bps > 0 && c.host.memory_bytes > 0 ? c.host : fallback;
}

double host_staging_Bps(const topo::Cluster& c, const topo::GpuEfficiency& efficiency) {
  return node_host(c).memory_bandwidth_Bps * efficiency.memory_bandwidth_fraction /
         std::max(1, c.gpus_per_node());
}

double cpu_adam_seconds(double params, int gpus_per_node) {
  return params * std::max(1, gpus_per_node) / CPU_ADAM_PARAMS_PER_S;
}

double offload_grad_bytes_per_elem() {
  return bytes_per_element(models::OPTIMIZER_DTYPE);
}

double offload_param_update_bytes_per_elem(const models::TrainingPlan& p) {
  if (p.offload_param == models::Offload::CPU) return 0.0;
  return p.zero >= 3 ? gathered_param_bytes(p) : bytes_per_element(models::OPTIMIZER_DTYPE);
}

namespace {

// The host stream of simulated GPU (replica, stage): its process's CPU work (the CPU step,
// staging copies), made on first use. It takes work as it becomes ready (ARRIVAL): a
// gradient's staging copy does not queue behind a later parameter fetch issued first.
sim::StreamId host_stream(StepGraph& g, size_t replica, int stage) {
  SimGpu& h = g.gpus[replica][static_cast<size_t>(stage)];
  if (h.host == sim::NO_STREAM) {
    h.host =
        g.engine.add_stream(fmt::format("rank{}/host", h.rank), h.rank, sim::StreamOrder::ARRIVAL);
  }
  return h.host;
}

// Seconds of the staging memcpy of a pageable copy of `bytes` (host_staging_Bps).
double staging_seconds(const StepGraph& g, double bytes) {
  const double bw = host_staging_Bps(g.cluster, g.options.efficiency);
  return bw > 0 ? 2.0 * bytes / bw : 0.0;
}

}  // namespace

TaskId offload_copy(StepGraph& g, size_t replica, int stage, double bytes, bool to_host,
                    const std::vector<TaskId>& deps, const std::string& label) {
  const SimGpu& h = g.gpus[replica][static_cast<size_t>(stage)];
  const topo::VertexId gpu = g.cluster.gpu_vertex(h.rank);
  const topo::VertexId cpu = nearest_cpu(g.cluster, gpu);
  sim::TransferSpec t;
  t.bytes = bytes;
  t.src_vertex = to_host ? gpu : cpu;
  t.dst_vertex = to_host ? cpu : gpu;
  t.label = label;
  TaskId id = g.add_transfer(t, TraceCategory::OFFLOAD, deps);
  RepStage& rep = g.reps[static_cast<size_t>(stage)];
  if (replica == 0) {
    rep.offload_copies.push_back(id);
    rep.offload_bytes += bytes;
  }
  if (g.plan.offload_pin_memory) return id;
  // Pageable: the driver's staging memcpy beside the DMA; the copy is done when both are.
  const TaskId staging = g.add_compute(host_stream(g, replica, stage), staging_seconds(g, bytes),
                                       g.label("{} staging", label), TraceCategory::OFFLOAD, deps);
  const TaskId done = g.add_compute(host_stream(g, replica, stage), 0.0, g.label("{} done", label),
                                    TraceCategory::OFFLOAD, {id, staging});
  if (replica == 0) rep.offload_copies.push_back(staging);
  return done;
}

std::vector<TaskId> lower_offloaded_optimizer(StepGraph& g, int s,
                                              const std::vector<std::vector<TaskId>>& waits,
                                              bool sharded, bool grads_copied,
                                              const std::vector<int>& only) {
  const double local = local_params(g, s, sharded);
  const double adam_s = cpu_adam_seconds(local, g.cluster.gpus_per_node());
  std::vector<TaskId> out(g.replicas.size(), -1);
  for (size_t ri = 0; ri < g.replicas.size(); ++ri) {
    if (!among(only, ri)) continue;
    const SimGpu& h = g.gpus[ri][static_cast<size_t>(s)];
    std::vector<TaskId> deps = waits[ri];
    deps.push_back(h.last_backward);
    if (!grads_copied) {
      deps = {offload_copy(g, ri, s, local * offload_grad_bytes_per_elem(), true, deps,
                           g.label("offload grads s{} ->host", s))};
    }
    // The host is not slowed by a straggling GPU: no straggler factor on the CPU step.
    const TaskId adam = g.add_compute(host_stream(g, ri, s), adam_s, g.label("cpu-adam s{}", s),
                                      TraceCategory::OPTIMIZER, deps);
    TaskId end = adam;
    const double back = local * offload_param_update_bytes_per_elem(g.plan);
    if (back > 0) end = offload_copy(g, ri, s, back, false, {adam}, g.label("params s{} ->gpu", s));
    out[ri] = end;
    if (ri == 0) g.optimizer_time_s += adam_s / g.stages();
  }
  return out;
}

}  // namespace loom::strategies
