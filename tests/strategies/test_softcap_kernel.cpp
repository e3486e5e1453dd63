// Soft-capped attention (Gemma 2: attn_logit_softcapping 50) and the kernel that runs it:
// cuDNN's fused attention cannot apply the cap, so Transformer Engine selects
// FlashAttention-2 for it (TE PR #3391, get_attention_backend with softcap != 0), as
// transformers does through flash-attn >= 2.6 (modeling_gemma2.py `softcap`). pass_cost times
// such a kernel as FlashAttention-2 whatever the plan's --attention-kernel.
#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "models/flops.hpp"
#include "models/model_loader.hpp"
#include "strategies/step/pass_cost.hpp"
#include "tests/source_path.hpp"
#include "topologies/gpu_catalog.hpp"
#include "topologies/kernel_model.hpp"

using namespace loom;
using namespace loom::strategies;

namespace {

const topo::DatasheetKernelModel& h100() {
  static const topo::DatasheetKernelModel model(topo::find_gpu("h100-sxm"), topo::GpuEfficiency{});
  return model;
}

// The scores and attention x V ops of Gemma 2 9B's first layer (a 4096-token window).
std::vector<models::OpCost> attention_matmuls(const models::TrainingPlan& plan) {
  const models::ModelSpec m =
      models::load_model(testing::source_path("examples/models/hf/gemma-2-9b-it/config.json"));
  std::vector<models::OpCost> out;
  for (const models::OpCost& op : models::layer_ops(m, plan, 0))
    if (op.kind == models::OpKind::ATTENTION) out.push_back(op);
  return out;
}

}  // namespace

TEST_CASE("strategies::PassCost: soft-capped flash attention runs as FlashAttention-2") {
  models::TrainingPlan vendor;
  vendor.seq = 8192;
  vendor.attention_kernel = models::AttentionKernel::VENDOR;
  models::TrainingPlan fa2 = vendor;
  fa2.attention_kernel = models::AttentionKernel::FA2;
  const std::vector<models::OpCost> capped = attention_matmuls(vendor);
  REQUIRE(capped.size() == 2);
  CHECK(std::all_of(capped.begin(), capped.end(), [](const auto& op) { return op.softcap; }));
  std::vector<models::OpCost> uncapped = capped;
  for (auto& op : uncapped) op.softcap = false;

  const PassCost on_vendor = cost_ops(capped, vendor, h100());
  const PassCost as_fa2 = cost_ops(uncapped, fa2, h100());
  const PassCost cudnn = cost_ops(uncapped, vendor, h100());
  CHECK(on_vendor.fwd_s == doctest::Approx(as_fa2.fwd_s).epsilon(1e-12));
  CHECK(on_vendor.bwd_input_s == doctest::Approx(as_fa2.bwd_input_s).epsilon(1e-12));
  // On Hopper FlashAttention-2 runs at (579 / 1.75) / 518 of cuDNN's rate
  // (topologies/kernel_model.cpp attention_kernel_factor): the cap costs that much.
  CHECK(on_vendor.fwd_s > 1.4 * cudnn.fwd_s);
}
