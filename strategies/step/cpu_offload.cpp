// CPU activation offloading (plan.cpu_offloading_num_layers; Megatron --cpu-offloading, run
// by Transformer Engine's get_cpu_offload_context: AsyncDoubleBufferGroupOffloadHandler in
// transformer_engine/pytorch/cpu_offload.py). The tensors the first N layers save for
// backward are copied to host memory after each layer's forward and back before its
// backward, on copy streams beside the compute:
//
//   forward   layer l's copy-out starts when its forward ends; the forward of layer l + 2
//             waits for it (two layers' buffers on the GPU: double buffering);
//   backward  layer l's copy-in is prefetched when the backward of layer l + 1 starts (here:
//             when layer l + 2's ends), after its copy-out; layer l's backward waits for it.
//
// The copies are flows from the GPU to its nearest CPU and back over the cluster's links
// (NVLink-C2C on Grace systems, PCIe elsewhere), sharing them with other traffic. Not
// modelled: the HBM bandwidth the copies take from concurrent kernels.
#include <fmt/format.h>

#include <limits>
#include <map>

#include "common/error.hpp"
#include "models/memory.hpp"
#include "strategies/step/lower_passes.hpp"

namespace loom::strategies {

topo::VertexId nearest_cpu(const topo::Cluster& c, topo::VertexId gpu) {
  topo::VertexId best = -1;
  double best_latency = std::numeric_limits<double>::infinity(), best_bw = 0;
  for (topo::VertexId v = 0; v < static_cast<topo::VertexId>(c.vertices().size()); ++v) {
    if (c.vertex(v).kind != topo::VertexKind::CPU) continue;
    topo::Path p;
    try {
      p = c.route(gpu, v);
    } catch (const Error&) {
      continue;  // not reachable from this GPU (another node's host without a fabric path)
    }
    if (p.latency_s < best_latency || (p.latency_s == best_latency && p.bandwidth_Bps > best_bw)) {
      best = v;
      best_latency = p.latency_s;
      best_bw = p.bandwidth_Bps;
    }
  }
  if (best < 0) {
    throw ValidationError("cpu_offloading_num_layers",
                          fmt::format("--cpu-offloading-num-layers: no CPU vertex is reachable "
                                      "from {}; link a \"cpu\" vertex to the node's GPUs "
                                      "(docs/clusters.md) or drop it",
                                      c.vertex(gpu).name));
  }
  return best;
}

void lower_cpu_offload(StepGraph& g) {
  const int n = g.plan.cpu_offloading_num_layers;
  if (n <= 0) return;
  // Stored bytes per micro-batch of each layer, from the memory model's per-layer facts (as the
  // search's fast tier takes them).
  const models::MemoryOps mops = models::memory_ops(g.model, g.plan);
  const auto bytes_of = [&](int layer) { return mops.layer(g.model, g.plan, layer).stored_bytes; };
  // By virtual stage: layer -> index of its unit.
  std::vector<std::map<int, size_t>> unit_of_vs(g.work.units.size());
  for (size_t vs = 0; vs < g.work.units.size(); ++vs)
    for (size_t u = 0; u < g.work.units[vs].size(); ++u)
      if (g.work.units[vs][u].layer >= 0) unit_of_vs[vs][g.work.units[vs][u].layer] = u;
  for (int s = 0; s < g.stages(); ++s) {
    const auto& passes = g.schedule.per_stage[static_cast<size_t>(s)];
    RepStage& rep = g.reps[static_cast<size_t>(s)];
    for (size_t ri = 0; ri < g.replicas.size(); ++ri) {
      const SimGpu& gpu = g.gpus[ri][static_cast<size_t>(s)];
      const topo::VertexId gv = g.cluster.gpu_vertex(gpu.rank);
      const topo::VertexId cpu = nearest_cpu(g.cluster, gv);
      // Per micro-batch and layer: the copy-out task.
      std::map<std::pair<int, int>, sim::TaskId> out;
      for (size_t pi = 0; pi < passes.size(); ++pi) {
        const Pass& pass = passes[pi];
        const int vs = g.schedule.virtual_stage(s, pass.chunk);
        const auto& tasks = gpu.units[pi];
        check_invariant(tasks.size() == g.work.units[static_cast<size_t>(vs)].size(),
                        "CPU offloading needs split passes");
        const std::map<int, size_t>& unit_of = unit_of_vs[static_cast<size_t>(vs)];
        for (const auto& [l, u] : unit_of) {
          if (l >= n) continue;
          const double bytes = bytes_of(l);
          sim::TransferSpec t;
          t.bytes = bytes;
          if (pass.kind == PassKind::FORWARD) {
            t.src_vertex = gv;
            t.dst_vertex = cpu;
            t.label = g.label("offload L{} mb{} ->host", l, pass.micro_batch);
            const sim::TaskId id = g.add_transfer(t, TraceCategory::OFFLOAD, {tasks[u].last});
            out[{pass.micro_batch, l}] = id;
            const auto next2 = unit_of.find(l + 2);
            if (next2 != unit_of.end()) {
              g.engine.add_dependency(id, tasks[next2->second].first);
              if (ri == 0)
                rep.offload_waits.emplace_back(tasks[unit_of.at(l + 1)].last,
                                               tasks[next2->second].first);
            }
          } else if (pass.kind != PassKind::BACKWARD_WEIGHT) {
            t.src_vertex = cpu;
            t.dst_vertex = gv;
            t.label = g.label("reload L{} mb{} ->gpu", l, pass.micro_batch);
            std::vector<sim::TaskId> deps;
            const auto copied = out.find({pass.micro_batch, l});
            if (copied != out.end()) deps.push_back(copied->second);
            const auto prev2 = unit_of.find(l + 2);  // runs before layer l in backward
            if (prev2 != unit_of.end()) deps.push_back(tasks[prev2->second].last);
            const sim::TaskId id = g.add_transfer(t, TraceCategory::OFFLOAD, deps);
            g.engine.add_dependency(id, tasks[u].first);
            const auto after1 = unit_of.find(l + 1);  // runs just before layer l in backward
            if (ri == 0 && after1 != unit_of.end())
              rep.offload_waits.emplace_back(tasks[after1->second].last, tasks[u].first);
          }
        }
      }
    }
  }
}

}  // namespace loom::strategies
