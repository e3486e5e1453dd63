#include "strategies/op_breakdown.hpp"

#include <fmt/format.h>

#include <map>
#include <memory>
#include <tuple>

#include "strategies/plan/plan_rules.hpp"
#include "strategies/rank_layout.hpp"
#include "strategies/step/rank_index.hpp"

namespace loom::strategies {
namespace {

std::string layer_kind_name(models::LayerKind kind) {
  switch (kind) {
    case models::LayerKind::DENSE:
      return "dense";
    case models::LayerKind::MOE:
      return "moe";
    case models::LayerKind::MAMBA:
      return "mamba";
    case models::LayerKind::ATTENTION:
      return "attention";
    case models::LayerKind::MLP:
      return "mlp";
    case models::LayerKind::MOE_MLP:
      return "moe mlp";
  }
  return "?";
}

OpListBreakdown breakdown(std::string what, const std::vector<models::OpCost>& ops,
                          const models::TrainingPlan& plan, const topo::KernelTimeModel& kernels,
                          OpList list, double host_s, bool recomputed, int ep_nodes) {
  OpListBreakdown b;
  b.what = std::move(what);
  b.pass = cost_ops(ops, plan, kernels, list, host_s, recomputed, ep_nodes, &b.ops);
  b.whole_graph = !b.ops.empty();
  for (const OpTiming& t : b.ops) {
    b.whole_graph = b.whole_graph && t.graphed;
    b.fwd_kernel_s += t.fwd_s;
    b.bwd_kernel_s += t.bwd_input_s + t.bwd_weight_s;
  }
  return b;
}

// "layer 3 (moe, window 128, not recomputed, bf16)": the layer's index and what sets it apart.
std::string layer_label(int index,
                        const std::tuple<models::LayerKind, bool, std::int64_t, bool>& kind,
                        const models::TrainingPlan& plan) {
  std::string what = fmt::format("layer {} ({}", index, layer_kind_name(std::get<0>(kind)));
  if (std::get<2>(kind) > 0) what += fmt::format(", window {}", std::get<2>(kind));
  if (!std::get<1>(kind) && plan.recompute != models::Recompute::NONE) what += ", not recomputed";
  if (std::get<3>(kind) && models::low_precision_linears(plan.precision)) what += ", bf16";
  return what + ")";
}

}  // namespace

bool fused_away(const OpTiming& op) {
  return op.fwd_s + op.bwd_input_s + op.bwd_weight_s == 0 &&
         op.fwd_launches + op.bwd_launches == 0 && op.comm == models::CommKind::NONE;
}

std::vector<OpListBreakdown> op_breakdown(const models::ModelSpec& model,
                                          const models::TrainingPlan& plan,
                                          const topo::Cluster& cluster,
                                          const SimulateOptions& options) {
  validate_plan_on_cluster(model, plan, cluster);
  check_simulate_options(options, cluster.num_gpus());
  const RankIndex index(RankLayout(plan, options.order), plan);
  const int ep_nodes = flex_exchange_nodes(plan, cluster, index.group(0, models::Dim::EP));
  std::vector<OpListBreakdown> out;
  for (int type = 0; type < cluster.num_gpu_types(); ++type) {
    const topo::GpuSpec& gpu = cluster.gpu_type(type);
    // As StepGraph: the options' kernel model times the first type, datasheets the others.
    const std::shared_ptr<const topo::KernelTimeModel> kernels =
        type == 0 && options.kernels
            ? options.kernels
            : std::make_shared<topo::DatasheetKernelModel>(gpu, options.efficiency);
    const double host_s = pass_host_launch_s(plan, options.host_launch_s, gpu);
    const size_t first = out.size();
    const auto emb = models::embedding_ops(model, plan);
    if (!emb.empty())
      out.push_back(
          breakdown("embedding", emb, plan, *kernels, OpList::EMBEDDING, host_s, true, 1));
    // Layers alike as cost_stages groups them.
    std::map<std::tuple<models::LayerKind, bool, std::int64_t, bool>, size_t> seen;
    for (int i = 0; i < model.layers; ++i) {
      const std::tuple<models::LayerKind, bool, std::int64_t, bool> kind{
          model.layer_kind(i), models::layer_recomputed(model, plan, i), model.attention_window(i),
          models::layer_in_bf16(model, plan, i)};
      if (const auto it = seen.find(kind); it != seen.end()) {
        ++out[it->second].count;
        continue;
      }
      seen.emplace(kind, out.size());
      out.push_back(breakdown(layer_label(i, kind, plan), models::layer_ops(model, plan, i), plan,
                              *kernels, OpList::LAYER, host_s, std::get<1>(kind), ep_nodes));
    }
    out.push_back(breakdown("head", models::head_ops(model, plan), plan, *kernels, OpList::HEAD,
                            host_s, true, ep_nodes));
    for (size_t k = first; k < out.size(); ++k) {
      out[k].gpu = gpu.name;
      for (OpTiming& t : out[k].ops)
        if (t.causal && plan.flash_attention)
          t.fwd_flops *= options.efficiency.attention_causal_fraction;
    }
  }
  return out;
}

}  // namespace loom::strategies
