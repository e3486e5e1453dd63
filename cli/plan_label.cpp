#include "cli/plan_label.hpp"

#include <fmt/format.h>

namespace loom::cli {

std::string schedule_text(const models::TrainingPlan& p) {
  if (p.schedule == models::Schedule::INTERLEAVED) return fmt::format("interleaved/{}", p.vpp);
  return models::to_string(p.schedule);
}

std::string plan_label(const models::TrainingPlan& p) {
  std::string s = fmt::format("tp{} pp{} dp{}", p.tp, p.pp, p.dp);
  if (p.cp > 1) s += fmt::format(" cp{}", p.cp);
  if (p.ep > 1) s += fmt::format(" ep{}", p.ep);
  s += fmt::format(" mbs{} {} z{} rc:{}", p.mbs, schedule_text(p), p.zero,
                   models::to_string(p.recompute));
  // Which layers recompute, when not all of them (every k-th; Megatron's block / uniform N).
  if (p.recompute != models::Recompute::NONE && p.recompute_every > 1)
    s += fmt::format("/every{}", p.recompute_every);
  if (p.recompute == models::Recompute::FULL &&
      (p.recompute_method == models::RecomputeMethod::BLOCK || p.recompute_num_layers > 1))
    s += fmt::format("/{}{}", models::to_string(p.recompute_method), p.recompute_num_layers);
  if (p.sp) s += " sp";
  if (p.overlap_grad_reduce) s += " ogr";
  if (p.overlap_param_gather) s += " opg";
  if (p.tp_comm_overlap) s += " tpo";
  if (p.overlap_moe_expert_parallel_comm) s += " a2ao";
  if (p.moe_dispatcher == models::MoeDispatcher::FLEX) s += " flex";
  if (p.cpu_offloading_num_layers > 0) s += fmt::format(" off{}", p.cpu_offloading_num_layers);
  return s;
}

}  // namespace loom::cli
