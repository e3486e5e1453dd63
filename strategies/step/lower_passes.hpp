#pragma once
// Lowering of the compute passes: every pass of the schedule on every simulated GPU as
// compute tasks on its compute stream, each followed by the model-parallel collectives
// (TP/SP, CP, EP) it issues, blocking on that stream as Megatron runs them. A pass is one
// task per model chunk, or one per unit when data-parallel work hangs on single units
// (StepGraph::split_pass). Simulated GPUs of one group share each collective, so passes are
// lowered in lockstep over the simulated replicas.
#include "strategies/step/step_graph.hpp"

namespace loom::strategies {

/// Adds every pass of every simulated GPU to `graph` (tasks, pass_tasks, units, and the
/// representative's measurements).
void lower_passes(StepGraph& graph);

/// After the engine ran: the representative's pass busy time, model-parallel comm seconds
/// per stage and by dimension (RepStage::busy_ps, comm_s; StepGraph::comm_total).
void measure_passes(StepGraph& graph);

/// The CPU vertex closest to GPU vertex `gpu` (least path latency, then widest path); throws
/// ValidationError naming cpu_offloading_num_layers when none is reachable.
topo::VertexId nearest_cpu(const topo::Cluster& cluster, topo::VertexId gpu);

/// Adds CPU activation offloading's copies (plan.cpu_offloading_num_layers): each offloaded
/// layer's saved tensors to the host after its forward and back before its backward, with
/// Transformer Engine's double buffering (cpu_offload.cpp). Needs split passes.
void lower_cpu_offload(StepGraph& graph);

/// Adds the pipeline's point-to-point transfers: activations forward, gradients backward,
/// non-blocking (isend/irecv, as Megatron's batched p2p), between consecutive virtual stages.
void lower_pipeline(StepGraph& graph);

}  // namespace loom::strategies
