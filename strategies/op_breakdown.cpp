#include "strategies/op_breakdown.hpp"

#include <fmt/format.h>

#include <map>
#include <memory>

#include "models/flops.hpp"
#include "models/plan_dtypes.hpp"
#include "strategies/plan/plan_rules.hpp"
#include "strategies/rank_layout.hpp"
#include "strategies/step/rank_index.hpp"

namespace loom::strategies {
namespace {

// One distinct op list of the plan, before any GPU times it.
struct ListSpec {
  std::string what;
  std::vector<models::OpCost> ops;
  OpList list = OpList::LAYER;
  bool recomputed = true;
  int ep_nodes = 1;
  int count = 1;
};

// "layer 3 (moe, window 128, not recomputed, bf16)": the layer's index and what sets it apart.
std::string layer_label(int index, const LayerCostKey& key, const models::TrainingPlan& plan) {
  std::string what = fmt::format("layer {} ({}", index, models::to_string(key.kind));
  if (key.window > 0) what += fmt::format(", window {}", key.window);
  if (!key.recomputed && plan.recompute != models::Recompute::NONE) what += ", not recomputed";
  if (key.bf16 && models::low_precision_linears(plan.precision)) what += ", bf16";
  return what + ")";
}

// The embedding, one list per distinct layer (its first layer's ops, counted as often as
// layers are alike) and the head.
std::vector<ListSpec> list_specs(const models::ModelSpec& model, const models::TrainingPlan& plan,
                                 int ep_nodes) {
  std::vector<ListSpec> out;
  auto emb = models::embedding_ops(model, plan);
  if (!emb.empty()) out.push_back({"embedding", std::move(emb), OpList::EMBEDDING, true, 1, 1});
  std::map<LayerCostKey, size_t> seen;
  for (int i = 0; i < model.layers; ++i) {
    const LayerCostKey key = layer_cost_key(model, plan, i);
    if (const auto it = seen.find(key); it != seen.end()) {
      ++out[it->second].count;
      continue;
    }
    seen.emplace(key, out.size());
    out.push_back({layer_label(i, key, plan), models::layer_ops(model, plan, i), OpList::LAYER,
                   key.recomputed, ep_nodes, 1});
  }
  out.push_back({"head", models::head_ops(model, plan), OpList::HEAD, true, ep_nodes, 1});
  return out;
}

// `spec` timed on one GPU; each op's forward FLOPs are those its kernel computes (a causal
// fused attention square: `causal_fraction` of the model's count).
OpListBreakdown breakdown(const ListSpec& spec, const std::string& gpu,
                          const models::TrainingPlan& plan, const topo::KernelTimeModel& kernels,
                          double host_s, double causal_fraction) {
  OpListBreakdown b;
  b.gpu = gpu;
  b.what = spec.what;
  b.count = spec.count;
  b.pass =
      cost_ops(spec.ops, plan, kernels, spec.list, host_s, spec.recomputed, spec.ep_nodes, &b.ops);
  b.whole_graph = !b.ops.empty();
  for (size_t i = 0; i < b.ops.size(); ++i) {
    OpTiming& t = b.ops[i];
    const models::OpCost& op = spec.ops[i];
    t.fwd_flops = op.causal && plan.flash_attention ? causal_fraction * op.fwd_flops : op.fwd_flops;
    t.fwd_bytes = op.input_bytes + op.output_bytes + op.weight_bytes;
    b.whole_graph = b.whole_graph && t.graphed;
    b.fwd_kernel_s += t.fwd_s;
    b.bwd_kernel_s += t.bwd_input_s + t.bwd_weight_s;
  }
  return b;
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
  const std::vector<ListSpec> specs =
      list_specs(model, plan, flex_exchange_nodes(plan, cluster, index.group(0, models::Dim::EP)));
  std::vector<OpListBreakdown> out;
  for (int type = 0; type < cluster.num_gpu_types(); ++type) {
    const topo::GpuSpec& gpu = cluster.gpu_type(type);
    // As StepGraph: the options' kernel model times the first type, datasheets the others.
    const std::shared_ptr<const topo::KernelTimeModel> kernels =
        type == 0 && options.kernels
            ? options.kernels
            : std::make_shared<topo::DatasheetKernelModel>(gpu, options.efficiency);
    const double host_s = pass_host_launch_s(plan, options.host_launch_s, gpu);
    for (const ListSpec& spec : specs)
      out.push_back(breakdown(spec, gpu.name, plan, *kernels, host_s,
                              options.efficiency.attention_causal_fraction));
  }
  return out;
}

}  // namespace loom::strategies
