#include "models/training_plan.hpp"

namespace loom::models {
// Each list is indexed by its enum's value.
const std::vector<std::string>& precision_names() {
  static const std::vector<std::string> names = {"fp32", "bf16", "fp16", "fp8", "nvfp4"};
  return names;
}
const std::vector<std::string>& optimizer_names() {
  static const std::vector<std::string> names = {"adam", "sgd", "sgd-momentum"};
  return names;
}
const std::vector<std::string>& recompute_names() {
  static const std::vector<std::string> names = {"none", "selective", "full"};
  return names;
}
const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names = {"naive", "gpipe", "1f1b", "interleaved", "zb"};
  return names;
}
const std::vector<std::string>& grad_dtype_names() {
  static const std::vector<std::string> names = {"fp32", "bf16"};
  return names;
}

const std::vector<std::string>& selective_recompute_names() {
  static const std::vector<std::string> names = {"attention", "op"};
  return names;
}
const std::vector<std::string>& recompute_method_names() {
  static const std::vector<std::string> names = {"uniform", "block"};
  return names;
}
const std::vector<std::string>& recompute_module_names() {
  static const std::vector<std::string> names = {"core_attn", "mla_up_proj", "mlp",
                                                 "moe_act",   "moe",         "layernorm"};
  return names;
}
namespace {
// A set of bits (bit i: the i-th of `names`) as a comma list in names' order.
std::string bit_set_text(std::uint32_t bits, const std::vector<std::string>& names) {
  std::string text;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!(bits & (std::uint32_t{1} << i))) continue;
    if (!text.empty()) text += ",";
    text += names[i];
  }
  return text;
}
}  // namespace
std::string recompute_modules_text(RecomputeModules modules) {
  return bit_set_text(modules, recompute_module_names());
}
const std::vector<std::string>& graph_module_names() {
  static const std::vector<std::string> names = {"full",       "attn",           "mlp",
                                                 "moe_router", "moe_preprocess", "mamba"};
  return names;
}
std::string graph_scope_text(GraphModules scope) {
  return bit_set_text(scope, graph_module_names());
}
const std::vector<std::string>& cross_entropy_names() {
  static const std::vector<std::string> names = {"fused", "eager", "unfused"};
  return names;
}

const std::vector<std::string>& fp8_recipe_names() {
  static const std::vector<std::string> names = {
      "auto", std::string(loom::to_string(Fp8Recipe::DELAYED)),
      std::string(loom::to_string(Fp8Recipe::TENSORWISE)),
      std::string(loom::to_string(Fp8Recipe::BLOCKWISE)),
      std::string(loom::to_string(Fp8Recipe::MXFP8))};
  return names;
}
std::string fp8_recipe_text(const std::optional<Fp8Recipe>& recipe) {
  return recipe ? std::string(loom::to_string(*recipe)) : "auto";
}

const std::vector<std::string>& framework_names() {
  static const std::vector<std::string> names = {"none", "megatron", "nemo", "torchtitan",
                                                 "deepspeed"};
  return names;
}

const std::vector<std::string>& fsdp_impl_names() {
  static const std::vector<std::string> names = {"fsdp2", "deepspeed"};
  return names;
}

std::string to_string(FsdpImpl v) {
  return fsdp_impl_names()[static_cast<size_t>(v)];
}

const std::vector<std::string>& offload_names() {
  static const std::vector<std::string> names = {"none", "cpu"};
  return names;
}

std::string to_string(Offload v) {
  return offload_names()[static_cast<size_t>(v)];
}

std::string to_string(Framework v) {
  return framework_names()[static_cast<size_t>(v)];
}

const std::vector<std::string>& attention_kernel_names() {
  static const std::vector<std::string> names = {"vendor", "fa2"};
  return names;
}
std::string to_string(AttentionKernel v) {
  return attention_kernel_names()[static_cast<size_t>(v)];
}

const std::vector<std::string>& moe_dispatcher_names() {
  static const std::vector<std::string> names = {"alltoall", "flex"};
  return names;
}
std::string to_string(MoeDispatcher v) {
  return moe_dispatcher_names()[static_cast<size_t>(v)];
}

const std::vector<std::string>& cp_comm_type_names() {
  static const std::vector<std::string> names = {"p2p", "a2a", "allgather", "a2a+p2p"};
  return names;
}
std::string to_string(CpCommType v) {
  return cp_comm_type_names()[static_cast<size_t>(v)];
}

const std::vector<std::string>& fusion_names() {
  static const std::vector<std::string> names = {"none", "megatron", "compile"};
  return names;
}

const std::vector<std::string>& dp_mode_names() {
  static const std::vector<std::string> names = {"ddp", "dataparallel", "ps"};
  return names;
}
const std::vector<std::string>& ps_shard_names() {
  static const std::vector<std::string> names = {"bytes", "tensor"};
  return names;
}
const std::vector<std::string>& ps_placement_names() {
  static const std::vector<std::string> names = {"host", "gpu"};
  return names;
}
std::string to_string(DpMode v) {
  return dp_mode_names()[static_cast<size_t>(v)];
}
std::string to_string(PsShard v) {
  return ps_shard_names()[static_cast<size_t>(v)];
}
std::string to_string(PsPlacement v) {
  return ps_placement_names()[static_cast<size_t>(v)];
}
std::string ps_update_text(PsUpdate update, int bound) {
  switch (update) {
    case PsUpdate::SYNC:
      return "sync";
    case PsUpdate::ASYNC:
      return "async";
    case PsUpdate::SSP:
      return "ssp:" + std::to_string(bound);
    case PsUpdate::GEO:
      return "geo:" + std::to_string(bound);
  }
  return "sync";
}

std::string to_string(Precision v) {
  return precision_names()[static_cast<size_t>(v)];
}
std::string to_string(Optimizer v) {
  return optimizer_names()[static_cast<size_t>(v)];
}
std::string to_string(Recompute v) {
  return recompute_names()[static_cast<size_t>(v)];
}
std::string to_string(Schedule v) {
  return schedule_names()[static_cast<size_t>(v)];
}
std::string to_string(GradDtype v) {
  return grad_dtype_names()[static_cast<size_t>(v)];
}

std::string to_string(SelectiveRecompute v) {
  return selective_recompute_names()[static_cast<size_t>(v)];
}
std::string to_string(RecomputeMethod v) {
  return recompute_method_names()[static_cast<size_t>(v)];
}
std::string to_string(CrossEntropy v) {
  return cross_entropy_names()[static_cast<size_t>(v)];
}
std::string to_string(Fusion v) {
  return fusion_names()[static_cast<size_t>(v)];
}

}  // namespace loom::models
