#include "cli/plan_text.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <map>

#include "common/csv.hpp"
#include "common/strings.hpp"
#include "strategies/plan/plan_fields.hpp"
#include "strategies/plan/plan_json.hpp"

namespace loom::cli {

namespace {

// The data-parallel design when it is not DDP (the default, left unsaid).
std::string design_text(const models::TrainingPlan& plan) {
  if (plan.dp_mode == models::DpMode::DATAPARALLEL) return "; dp-mode dataparallel";
  if (plan.dp_mode != models::DpMode::PS) {
    // DeepSpeed's offload: what lives on the host.
    std::vector<std::string> off;
    if (plan.offload_optimizer != models::Offload::NONE) off.emplace_back("optimizer");
    if (plan.offload_param != models::Offload::NONE) off.emplace_back("parameters");
    if (off.empty()) return "";
    return fmt::format("; offload {} to cpu ({})", join(off, " and "),
                       plan.offload_pin_memory ? "pinned" : "pageable");
  }
  return fmt::format("; dp-mode ps: {} server{} on {}, {}, shards by {}", plan.ps_servers,
                     plan.ps_servers == 1 ? "" : "s", models::to_string(plan.ps_placement),
                     models::ps_update_text(plan.ps_update, plan.ps_update_bound),
                     models::to_string(plan.ps_shard));
}

// The overlap switches in effect, as their flags name them ("" when none is on).
std::string overlap_text(const models::TrainingPlan& plan) {
  std::vector<std::string> on;
  if (plan.overlap_grad_reduce) on.emplace_back("grad-reduce");
  if (plan.overlap_param_gather) on.emplace_back("param-gather");
  if (plan.tp_comm_overlap) on.emplace_back("tp-comm");
  if (plan.overlap_moe_expert_parallel_comm) on.emplace_back("moe-expert-parallel-comm");
  return on.empty() ? "" : "; overlap " + join(on, ", ");
}

}  // namespace

std::string precision_text(const models::TrainingPlan& plan) {
  return fmt::format("{}{}{}", models::to_string(plan.precision),
                     plan.fp8_recipe ? fmt::format("/{}", loom::to_string(*plan.fp8_recipe)) : "",
                     plan.scale_swizzle ? " +scale-swizzle" : "");
}

std::string plan_summary(const models::TrainingPlan& plan) {
  const std::int64_t micro_batches = plan.micro_batches();
  return fmt::format(
      "tp {} pp {} dp {} cp {} ep {}{}{}{}; mbs {} gbs {} ({} micro-batch{}) seq {}; {} {} grad {} "
      "zero {} recompute {} schedule {}{}{}{}{}",
      plan.tp, plan.pp, plan.dp, plan.cp, plan.ep,
      plan.moe_dispatcher == models::MoeDispatcher::FLEX ? " (flex dispatcher)" : "",
      plan.vpp > 1 ? fmt::format(" vpp {}", plan.vpp) : "", plan.sp ? " +sp" : "", plan.mbs,
      plan.global_batch(), micro_batches, micro_batches == 1 ? "" : "es", plan.seq,
      precision_text(plan), models::to_string(plan.optimizer), models::to_string(plan.grad_dtype),
      plan.zero, models::to_string(plan.recompute), models::to_string(plan.schedule),
      plan.flash_attention ? "" : " (no flash attention)",
      plan.cuda_graphs
          ? fmt::format(" cuda-graphs {}", models::graph_scope_text(plan.cuda_graph_scope))
          : "",
      overlap_text(plan), design_text(plan));
}

OrderedJson plan_output_json(const models::TrainingPlan& plan) {
  const OrderedJson fields = strategies::plan_to_json(plan);
  std::map<std::string, const strategies::PlanField*, std::less<>> sizes;
  for (const auto& f : strategies::plan_fields())
    if (f.type == strategies::FieldType::BYTES && f.get) sizes[std::string(f.key)] = &f;
  OrderedJson out = OrderedJson::object();
  for (const auto& [key, value] : fields.items()) {
    const auto size = sizes.find(key);
    if (size == sizes.end() || !value.is_string()) {
      out[key] = value;
      continue;
    }
    // bytes_text wrote the resolved size as "<bytes>B".
    const auto text = value.get<std::string>();
    const double v = std::stod(text.substr(0, text.size() - 1));
    if (std::abs(v) < 0x1p53 && std::floor(v) == v)
      out[key + "_bytes"] = static_cast<std::int64_t>(v);
    else
      out[key + "_bytes"] = v;
  }
  return out;
}

double tokens_per_s_per_gpu(double tokens_per_s, const models::TrainingPlan& plan) {
  return tokens_per_s / static_cast<double>(plan.gpus());
}

void append_plan_columns(const models::TrainingPlan& plan, std::vector<std::string>& header,
                         std::vector<std::string>& row) {
  const OrderedJson fields = plan_output_json(plan);
  for (const auto& [key, value] : fields.items()) {
    header.push_back(key);
    if (value.is_string()) {
      row.push_back(value.get<std::string>());
    } else if (value.is_boolean()) {
      row.push_back(value.get<bool>() ? "true" : "false");
    } else if (value.is_number_integer()) {
      row.push_back(std::to_string(value.get<std::int64_t>()));
    } else if (value.is_number()) {
      row.push_back(csv_number(value.get<double>()));
    } else if (value.is_array()) {
      std::vector<std::string> parts;
      for (const auto& x : value) parts.push_back(x.dump());
      row.push_back(join(parts, ","));
    } else {
      row.push_back(value.dump());
    }
  }
}

}  // namespace loom::cli
