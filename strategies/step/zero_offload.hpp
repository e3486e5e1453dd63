#pragma once
// DeepSpeed's optimizer and parameter offload in the step (plan.offload_optimizer,
// plan.offload_param): what moves over the GPU's link to its host and what the host computes.
//
// ZeRO-Offload (deepspeed/runtime/zero/stage_1_and_2.py, cpu_offload; Ren et al. 2021,
// arXiv:2101.06840): each reduced gradient bucket's partition is cast to fp32 on the GPU and
// copied to the host's fp32 gradient buffer (async_inplace_copy_grad_to_fp32_buffer_from_gpu:
// 4 B per partition element); at the step, DeepSpeedCPUAdam updates the fp32 master partition
// on the CPU and the partition is copied back and cast to 16 bits on the GPU
// (`fp32_partition.to(device)`: 4 B per element), then all-gathered as without offload.
// ZeRO-3 (stage3.py partition_grads): each micro-batch's reduced partition goes to the host
// accumulation buffer (2 B per element in the training dtype; from the second micro-batch on
// fetched back first, added on the GPU and copied out again), the last one also as fp32
// (4 B); after the CPU step the 16-bit partition is written back (2 B). ZeRO-Infinity's
// parameter offload (offload_param, stage 3): the 16-bit partition lives on the host and is
// copied to the GPU before each all-gather of it (2 B per element); the step's update stays
// on the host.
//
// The CPU step: DeepSpeedCPUAdam at CPU_ADAM_PARAMS_PER_S for one node's CPUs, shared by the
// node's GPUs, whose processes step at the same time. Copies are flows between the GPU and
// its nearest CPU vertex (PCIe, or NVLink-C2C on Grace systems), sharing the links with other
// traffic. Pageable host buffers (pin_memory false): the CUDA driver stages each copy through
// pinned buffers, a host memcpy (read + write of the bytes, at the node's memory bandwidth
// shared by its GPUs) beside the DMA: the copy ends when both have.
#include <string>
#include <vector>

#include "strategies/step/step_graph.hpp"

namespace loom::strategies {

/// DeepSpeedCPUAdam's update rate on one node's CPUs, parameters per second: 11.6e9
/// parameters in 8.2 s (an 11.6B-parameter GPT-2 with ZeRO-Offload, DeepSpeed PR #735, R.
/// Yazdani Aminabadi, Feb 2021: "it reduces the optimizer time from 56 seconds to 8.2
/// seconds", torch's Adam taking 56 s). Hosts differ widely: DeepSpeed issue #1635 measured
/// 1.35e9 parameters in 21.8 s on a Xeon Silver 4210R.
inline constexpr double CPU_ADAM_PARAMS_PER_S = 11.6e9 / 8.2;

/// The host of a GPU node, whose memory and bandwidth the offload uses: the cluster's host
/// spec when it has one (`--hosts`, a cluster JSON's "host"), else topo::default_host() (a DGX
/// H100's two Xeon Platinum 8480 sockets and 2 TB).
const topo::HostSpec& node_host(const topo::Cluster& cluster);

/// Bytes per second of one GPU's share of its host for the staging memcpy of a pageable copy:
/// the node's memory bandwidth at the streaming fraction a kernel reaches (`efficiency`),
/// shared by the node's GPUs. A copy of B bytes reads and writes them: 2 B at this rate.
double host_staging_Bps(const topo::Cluster& cluster, const topo::GpuEfficiency& efficiency);

/// Seconds of one GPU's CPU Adam step over `params` parameters, its node's `gpus_per_node`
/// processes stepping at once (each gets that share of CPU_ADAM_PARAMS_PER_S).
double cpu_adam_seconds(double params, int gpus_per_node);

/// Bytes per partition element of the gradients ZeRO-Offload copies to the host once a step's
/// accumulation ends: 4, the optimizer's fp32, whatever the plan. (ZeRO-3's copies per
/// micro-batch before it move the training dtype, and from the second micro-batch on the same
/// again back to the GPU: dp_fsdp.cpp.)
double offload_grad_bytes_per_elem();
/// Bytes per partition element of the updated parameters copied back to the GPU after the
/// CPU step: 4 (the fp32 partition, cast on the GPU) under ZeRO-1/2, 2 under ZeRO-3 (its
/// 16-bit partition), 0 when the parameters themselves are offloaded (they stay on the host).
double offload_param_update_bytes_per_elem(const models::TrainingPlan& plan);

/// A copy of `bytes` between simulated GPU (`replica`, `stage`) and its nearest CPU (to the
/// host when `to_host`), after `deps`; with pageable buffers also the staging memcpy beside
/// it. Returns the task the copy's users wait for (OFFLOAD in the trace). Counts the bytes
/// and tasks into the representative's measurements.
sim::TaskId offload_copy(StepGraph& graph, size_t replica, int stage, double bytes, bool to_host,
                         const std::vector<sim::TaskId>& deps, const std::string& label);

/// The offloaded optimizer step of `stage` (plan.offload_optimizer): per replica, when
/// `grads_copied` is false the whole gradient partition is copied to the host first (no
/// bucketed design did it), then CPU Adam on the replica's host stream after `waits`, then
/// the updated partition back to the GPU. Returns the task per replica its step ends with (-1
/// where none runs). The step's host seconds go into StepGraph::optimizer_time_s.
std::vector<sim::TaskId> lower_offloaded_optimizer(
    StepGraph& graph, int stage, const std::vector<std::vector<sim::TaskId>>& waits, bool sharded,
    bool grads_copied, const std::vector<int>& replicas = {});

}  // namespace loom::strategies
