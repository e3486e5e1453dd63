// The rules of DeepSpeed's optimizer and parameter offload (plan fields offload_optimizer,
// offload_param, offload_pin_memory), as DeepSpeed itself states them:
//
//   offload_optimizer  read by the ZeRO optimizers only (deepspeed/runtime/zero/
//                      stage_1_and_2.py, stage3.py; offload_config.py: "Valid with stage 1, 2,
//                      and 3"), which step it with DeepSpeedCPUAdam (engine.py
//                      zero_force_ds_cpu_optimizer, on by default): zero 1+ and Adam.
//   offload_param      stage 3 only (offload_config.py: "Valid only with stage 3").
//   pin_memory         a property of the offloaded buffers: nothing without offload.
//
// loom models DeepSpeed's ZeRO-3 design for it (not FSDP2's CPUOffloadPolicy), one process per
// GPU (dp_mode ddp), and copies to a CPU vertex of the cluster.
#include <fmt/format.h>

#include <algorithm>

#include "strategies/plan/plan_rules.hpp"
#include "topologies/cluster.hpp"

namespace loom::strategies {

using models::Offload;
using models::TrainingPlan;

namespace {

bool offloads(const TrainingPlan& p) {
  return p.offload_optimizer != Offload::NONE || p.offload_param != Offload::NONE;
}

// The offload field that is on (offload_optimizer first).
const char* offload_key(const TrainingPlan& p) {
  return p.offload_optimizer != Offload::NONE ? "offload_optimizer" : "offload_param";
}

}  // namespace

void check_offload(const TrainingPlan& p, const PlanSources& s) {
  if (p.offload_pin_memory && !offloads(p)) {
    fail_field(s, "offload_pin_memory",
               fmt::format("{} on has no effect without {} or {}: nothing is offloaded to pin; "
                           "drop it or offload",
                           s.where("offload_pin_memory"), s.name("offload_optimizer"),
                           s.name("offload_param")));
  }
  if (!offloads(p)) return;
  const char* key = offload_key(p);
  if (p.offload_optimizer != Offload::NONE && p.zero < 1) {
    fail_field(s, "offload_optimizer",
               fmt::format("{} cpu has no effect with {} 0: DeepSpeed offloads the optimizer in "
                           "its ZeRO optimizers only (stages 1-3, "
                           "deepspeed/runtime/zero/offload_config.py); use {} 1 or more",
                           s.where("offload_optimizer"), s.name("zero"), s.name("zero")));
  }
  if (p.offload_param != Offload::NONE && p.zero < 3) {
    fail_field(s, "offload_param",
               fmt::format("{} cpu needs {} 3: DeepSpeed offloads parameters only under ZeRO-3 "
                           "(offload_config.py: \"Valid only with stage 3\"); use {} 3 or drop it",
                           s.where("offload_param"), s.name("zero"), s.name("zero")));
  }
  if (p.zero >= 3 && p.fsdp_impl != models::FsdpImpl::DEEPSPEED) {
    fail_field(s, key,
               fmt::format("{} cpu with {} {}: loom models DeepSpeed's offload (ZeRO-Offload, "
                           "ZeRO-Infinity), not FSDP2's CPUOffloadPolicy; use {} deepspeed",
                           s.where(key), s.name("fsdp_impl"), models::to_string(p.fsdp_impl),
                           s.name("fsdp_impl")));
  }
  if (p.framework != models::Framework::NONE && p.framework != models::Framework::DEEPSPEED) {
    fail_field(s, key,
               fmt::format("{} cpu under {} {}: this is DeepSpeed's offload (its ZeRO "
                           "optimizers and DeepSpeedCPUAdam); use {} deepspeed or none",
                           s.where(key), s.name("framework"), models::to_string(p.framework),
                           s.name("framework")));
  }
  if (p.dp_mode != models::DpMode::DDP) {
    fail_field(s, key,
               fmt::format("{} cpu with {} {}: DeepSpeed runs one process per GPU; use {} ddp",
                           s.where(key), s.name("dp_mode"), models::to_string(p.dp_mode),
                           s.name("dp_mode")));
  }
  if (p.offload_optimizer != Offload::NONE && p.optimizer != models::Optimizer::ADAM) {
    fail_field(s, "offload_optimizer",
               fmt::format("{} cpu with {} {}: DeepSpeed steps an offloaded optimizer with "
                           "DeepSpeedCPUAdam (engine.py zero_force_ds_cpu_optimizer), and loom's "
                           "CPU step rate is CPU Adam's; use {} adam",
                           s.where("offload_optimizer"), s.name("optimizer"),
                           models::to_string(p.optimizer), s.name("optimizer")));
  }
}

void check_offload_cluster(const TrainingPlan& p, const topo::Cluster& cluster,
                           const PlanSources& s) {
  if (offloads(p)) require_cpu_vertex(cluster, s, offload_key(p), "cpu");
}

void require_cpu_vertex(const topo::Cluster& cluster, const PlanSources& s, const char* key,
                        std::string_view value) {
  const auto& v = cluster.vertices();
  if (std::any_of(v.begin(), v.end(),
                  [](const topo::Vertex& x) { return x.kind == topo::VertexKind::CPU; }))
    return;
  fail_field(s, key,
             fmt::format("{} {}: cluster '{}' has no CPU vertex to offload to; add a \"cpu\" "
                         "vertex linked to the GPUs (docs/clusters.md) or drop it",
                         s.where(key), value, cluster.name));
}

}  // namespace loom::strategies
