#include "strategies/search/search_space.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "strategies/plan/framework_profile.hpp"
#include "strategies/plan/plan_effects.hpp"
#include "strategies/plan/plan_resolve.hpp"
#include "strategies/plan/plan_rules.hpp"

namespace loom::strategies {
namespace {

using models::Recompute;
using models::Schedule;

std::vector<std::int64_t> divisors(std::int64_t n) {
  std::vector<std::int64_t> out;
  for (std::int64_t d = 1; d * d <= n; ++d) {
    if (n % d != 0) continue;
    out.push_back(d);
    if (d * d != n) out.push_back(n / d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The divisors of `n` up to `limit`, or the input's value alone when it sets `key`.
std::vector<std::optional<int>> size_list(const PlanInput& in, std::string_view key, std::int64_t n,
                                          std::int64_t limit) {
  if (in.has(key)) return {std::nullopt};
  std::vector<std::optional<int>> out;
  for (std::int64_t d : divisors(n))
    if (d <= limit) out.push_back(static_cast<int>(d));
  return out;
}

std::vector<std::optional<bool>> switch_list(const PlanInput& in, std::string_view key) {
  if (in.has(key)) return {std::nullopt};
  return {false, true};
}

std::vector<std::optional<ScheduleChoice>> schedule_list(const PlanInput& in, int layers) {
  const bool schedule_set = in.has("schedule");
  const bool vpp_set = in.has("vpp") || in.has("layers_per_virtual_stage");
  if (vpp_set || (schedule_set && *in.text("schedule") != "interleaved")) return {std::nullopt};
  std::vector<std::optional<ScheduleChoice>> out;
  if (!schedule_set) {
    for (Schedule s : {Schedule::ONE_F_ONE_B, Schedule::GPIPE, Schedule::ZERO_BUBBLE})
      out.push_back(ScheduleChoice{s, 1});
  }
  for (std::int64_t v : divisors(layers))
    if (v >= 2) out.push_back(ScheduleChoice{Schedule::INTERLEAVED, static_cast<int>(v)});
  return out;
}

// The input's value of a pinned field, as the plan JSON spells it ("as given" when another
// field decides it, e.g. vpp from layers_per_virtual_stage).
std::string pinned_text(const PlanInput& in, std::string_view key) {
  if (!in.has(key)) return "as given";
  switch (plan_field(key).type) {
    case FieldType::SIZE:
    case FieldType::STAGE:
      return fmt::format("{} (fixed)", *in.integer(key));
    case FieldType::SWITCH:
    case FieldType::TOGGLE:
      return fmt::format("{} (fixed)", in.flag(key) ? "on" : "off");
    case FieldType::CHOICE:
      return fmt::format("{} (fixed)", *in.text(key));
    default:
      return "as given";
  }
}

template <typename T, typename F>
std::string list_text(const std::vector<std::optional<T>>& values, F name, const PlanInput& in,
                      std::string_view key) {
  if (values.size() == 1 && !values.front()) return pinned_text(in, key);
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ',';
    out += name(*values[i]);
  }
  return out + "}";
}

// Layer counts per virtual stage: the fewer on the first and last stages, alternating
// inwards (stage 0, S-1, 1, S-2, ...).
std::string balanced_split(int layers, int stages) {
  const int base = layers / stages, extra = layers % stages;
  std::vector<int> counts(static_cast<size_t>(stages), base + 1);
  int fewer = stages - extra;
  for (int k = 0; fewer > 0; ++k, --fewer)
    counts[static_cast<size_t>(k % 2 == 0 ? k / 2 : stages - 1 - k / 2)] = base;
  std::string out;
  for (size_t i = 0; i < counts.size(); ++i) out += fmt::format("{}{}", i ? "," : "", counts[i]);
  return out;
}

template <typename T>
const T& pick(const std::vector<T>& list, std::int64_t& index) {
  const auto n = static_cast<std::int64_t>(list.size());
  const T& v = list[static_cast<size_t>(index % n)];
  index /= n;
  return v;
}

}  // namespace

SearchSpace::SearchSpace(const models::ModelSpec& model, PlanInput input, std::int64_t gpus,
                         std::string_view cluster)
    : model_(model), input_(std::move(input)), gpus_(gpus) {
  const PlanSources& s = input_.sources();
  if (!input_.has("gbs")) {
    fail_field(s, "gbs",
               fmt::format("{}: a search needs the global batch fixed (every plan then trains the "
                           "same tokens per step); give it, e.g. {} 1536",
                           s.where("gbs"), s.name("gbs")));
  }
  if (input_.has("pipeline_split") && !input_.has("pp")) {
    fail_field(s, "pipeline_split",
               fmt::format("{} fixes the pipeline; give {} (and {}) with it, or leave the split "
                           "to the search",
                           s.where("pipeline_split"), s.name("pp"), s.name("vpp")));
  }
  if (const auto dp = input_.integer("dp")) pinned_dp_ = static_cast<int>(*dp);
  pinned_tp_ = static_cast<int>(input_.integer("tp").value_or(1));
  pinned_pp_ = static_cast<int>(input_.integer("pp").value_or(1));
  pinned_cp_ = static_cast<int>(input_.integer("cp").value_or(1));
  pinned_zero_ = static_cast<int>(input_.integer("zero").value_or(0));
  const bool transformer = model.kind == models::ModelKind::TRANSFORMER;
  // The model's own sequence length unless --seq is given, as simulate and memory take it.
  const std::int64_t seq = input_.integer("seq").value_or(model.default_seq);
  const std::int64_t gbs = *input_.integer("gbs");
  tp_ = size_list(input_, "tp", gpus, gpus);
  pp_ = size_list(input_, "pp", gpus, model.layers);
  cp_ = transformer ? size_list(input_, "cp", gpus, std::max<std::int64_t>(1, seq / 2))
                    : std::vector<std::optional<int>>{input_.has("cp") ? std::nullopt
                                                                       : std::optional<int>(1)};
  ep_ = model.is_moe() ? size_list(input_, "ep", model.moe.experts, gpus)
                       : std::vector<std::optional<int>>{input_.has("ep") ? std::nullopt
                                                                          : std::optional<int>(1)};
  schedule_ = schedule_list(input_, model.layers);
  if (input_.has("mbs")) {
    mbs_ = {std::nullopt};
  } else {
    for (std::int64_t d : divisors(gbs)) mbs_.push_back(d);
  }
  forced_sp_ = transformer && framework_profile(resolve_fields(input_, {"framework"}, {}).framework)
                                  .sequence_parallel_with_tp;
  sp_ = transformer ? switch_list(input_, "sp")
                    : std::vector<std::optional<bool>>{
                          input_.has("sp") ? std::nullopt : std::optional<bool>(false)};
  if (input_.has("zero")) {
    zero_ = {std::nullopt};
  } else {
    zero_ = {0, 1, 2, 3};
  }
  if (input_.has("recompute")) {
    recompute_ = {std::nullopt};
  } else {
    recompute_ = {Recompute::NONE, Recompute::SELECTIVE, Recompute::FULL};
  }
  ogr_ = switch_list(input_, "overlap_grad_reduce");
  opg_ = switch_list(input_, "overlap_param_gather");
  tpo_ = switch_list(input_, "tp_comm_overlap");
  // The EP all-to-all overlap: a free switch of MoE models, unless a fixed value rules it out
  // everywhere (ep 1, whole-layer CUDA graphs, full recompute, fp32: moe_a2a_overlap_block;
  // a graph holding a dense layer's whole MLP: plan_rules check_cuda_graph_scope).
  const models::TrainingPlan graphs = resolve_fields(input_, {"cuda_graph_scope"}, {"cuda_graphs"});
  const bool dense_layers = model.has_dense_layers();
  const bool graphs_block = graphs.graphs(models::GraphModule::FULL) ||
                            (dense_layers && graphs.graphs(models::GraphModule::MLP));
  const bool moe_overlap_possible = model.is_moe() && input_.integer("ep").value_or(0) != 1 &&
                                    !graphs_block &&
                                    input_.text("recompute").value_or("") != "full" &&
                                    input_.text("precision").value_or("") != "fp32";
  moeo_ = moe_overlap_possible ? switch_list(input_, "overlap_moe_expert_parallel_comm")
                               : std::vector<std::optional<bool>>{std::nullopt};
  shapes_ = static_cast<std::int64_t>(tp_.size() * pp_.size() * cp_.size() * ep_.size() *
                                      schedule_.size() * mbs_.size() * sp_.size());
  switch_combinations_ = static_cast<std::int64_t>(zero_.size() * recompute_.size() * ogr_.size() *
                                                   opg_.size() * tpo_.size() * moeo_.size());
  fingerprint_ =
      fmt::format("{} gpus {} layers {} gbs {} seq {} model {} cluster {} input {}", describe(),
                  gpus_, model.layers, gbs, seq, model.name, cluster, input_.canonical());
}

std::optional<PlanShape> SearchSpace::shape(std::int64_t index) const {
  if (index < 0 || index >= shapes_) return std::nullopt;
  // Mixed radix, fastest first: sp, mbs, schedule, ep, cp, pp, tp.
  PlanShape s;
  s.sp = pick(sp_, index);
  s.mbs = pick(mbs_, index);
  s.schedule = pick(schedule_, index);
  s.ep = pick(ep_, index);
  s.cp = pick(cp_, index);
  s.pp = pick(pp_, index);
  s.tp = pick(tp_, index);
  const std::int64_t tp = s.tp.value_or(pinned_tp_);
  const std::int64_t pp = s.pp.value_or(pinned_pp_);
  const std::int64_t cp = s.cp.value_or(pinned_cp_);
  const bool any_free = s.tp || s.pp || s.cp;
  // A pinned size that breaks the GPU count is left to the rules (they name it).
  if (any_free && tp > 0 && pp > 0 && cp > 0) {
    const std::int64_t mp = tp * pp * cp;
    if (gpus_ % mp != 0) return std::nullopt;
    if (pinned_dp_ && gpus_ / mp != *pinned_dp_) return std::nullopt;
  }
  if (s.sp && *s.sp && tp == 1) return std::nullopt;
  if (s.sp && !*s.sp && tp > 1 && forced_sp_) return std::nullopt;
  // One stage has no pipeline to schedule: GPipe and ZB-H1 take 1F1B's time (and GPipe holds
  // more activations); a free schedule with pp 1 is 1F1B alone.
  if (s.schedule && s.schedule->schedule != Schedule::ONE_F_ONE_B && pp == 1 &&
      s.schedule->schedule != Schedule::INTERLEAVED)
    return std::nullopt;
  return s;
}

PlanInput SearchSpace::shape_input(const PlanShape& s) const {
  PlanInput in = input_;
  if (s.tp) in.set("tp", std::int64_t{*s.tp});
  if (s.pp) in.set("pp", std::int64_t{*s.pp});
  if (s.cp) in.set("cp", std::int64_t{*s.cp});
  if (s.ep) in.set("ep", std::int64_t{*s.ep});
  if (s.mbs) in.set("mbs", *s.mbs);
  if (s.sp) in.set("sp", *s.sp);
  if (s.schedule) {
    in.set("schedule", models::to_string(s.schedule->schedule));
    in.set("vpp", std::int64_t{s.schedule->vpp});
  }
  // The split is left to the search, unless Megatron's accounting places the layers.
  if (!input_.has("pipeline_split") && accounting_layers(input_) == 0) {
    const std::int64_t pp = in.integer("pp").value_or(1), vpp = in.integer("vpp").value_or(1);
    const std::int64_t stages = pp * vpp;
    if (!in.has("layers_per_virtual_stage") && stages > 0 && stages <= model_.layers &&
        model_.layers % stages != 0)
      in.set("pipeline_split", balanced_split(model_.layers, static_cast<int>(stages)));
  }
  return in;
}

models::TrainingPlan SearchSpace::resolve(const PlanShape& shape) const {
  const PlanInput in = shape_input(shape);
  models::TrainingPlan plan = resolve_plan(in, gpus_, model_.layers, model_.default_seq,
                                           model_.kind == models::ModelKind::TRANSFORMER);
  validate_plan(model_, plan, gpus_, in.sources());
  return plan;
}

std::pair<int, int> SearchSpace::tp_dp(const PlanShape& s) const {
  const int tp = s.tp.value_or(pinned_tp_);
  const std::int64_t pp = s.pp.value_or(pinned_pp_);
  const std::int64_t cp = s.cp.value_or(pinned_cp_);
  if (pinned_dp_) return {tp, *pinned_dp_};
  const std::int64_t mp = std::int64_t{tp} * pp * cp;
  return {tp, mp > 0 && gpus_ % mp == 0 ? static_cast<int>(gpus_ / mp) : 1};
}

std::optional<PlanSwitches> SearchSpace::switches(std::int64_t index, int tp, int dp) const {
  if (index < 0 || index >= switch_combinations_) return std::nullopt;
  PlanSwitches w;
  w.overlap_moe_expert_parallel_comm = pick(moeo_, index);
  w.tp_comm_overlap = pick(tpo_, index);
  w.overlap_param_gather = pick(opg_, index);
  w.overlap_grad_reduce = pick(ogr_, index);
  w.recompute = pick(recompute_, index);
  w.zero = pick(zero_, index);
  // Free switches that cannot act on this plan are not enumerated (their "on" is the "off").
  const int zero = w.zero.value_or(pinned_zero_);
  if (w.zero && *w.zero > 0 && dp == 1) return std::nullopt;
  if (w.overlap_grad_reduce && *w.overlap_grad_reduce && dp == 1) return std::nullopt;
  if (w.overlap_param_gather && *w.overlap_param_gather && (dp == 1 || zero < 1 || zero > 2))
    return std::nullopt;
  if (w.tp_comm_overlap && *w.tp_comm_overlap && tp == 1) return std::nullopt;
  return w;
}

std::int64_t SearchSpace::switch_count(int tp, int dp) const {
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < switch_combinations_; ++i)
    if (switches(i, tp, dp)) ++n;
  return n;
}

void SearchSpace::apply(const PlanSwitches& w, models::TrainingPlan& plan) {
  if (w.zero) plan.zero = *w.zero;
  if (w.recompute) plan.recompute = *w.recompute;
  if (w.overlap_grad_reduce) plan.overlap_grad_reduce = *w.overlap_grad_reduce;
  if (w.overlap_param_gather) plan.overlap_param_gather = *w.overlap_param_gather;
  if (w.tp_comm_overlap) plan.tp_comm_overlap = *w.tp_comm_overlap;
  if (w.overlap_moe_expert_parallel_comm)
    plan.overlap_moe_expert_parallel_comm = *w.overlap_moe_expert_parallel_comm;
}

std::optional<std::string> SearchSpace::switch_blocked(const PlanSwitches& w,
                                                       const models::TrainingPlan& plan) {
  if (!w.overlap_moe_expert_parallel_comm || !*w.overlap_moe_expert_parallel_comm)
    return std::nullopt;
  const auto block = moe_a2a_overlap_block(plan, PlanSources::command_line());
  if (!block) return std::nullopt;
  return fmt::format(
      "--overlap-moe-expert-parallel-comm has no effect {}; the search counts "
      "it only where it acts",
      block->why);
}

models::TrainingPlan SearchSpace::candidate(std::int64_t id) const {
  const std::int64_t n = switch_combinations_;
  const auto s = id >= 0 ? shape(id / n) : std::nullopt;
  if (!s) throw ValidationError("id", fmt::format("{} is not a candidate of this search", id));
  models::TrainingPlan plan = resolve(*s);
  const auto w = switches(id % n, plan.tp, plan.dp);
  if (!w) throw ValidationError("id", fmt::format("{} is not a candidate of this search", id));
  apply(*w, plan);
  if (const auto why = switch_blocked(*w, plan))
    throw ValidationError("overlap_moe_expert_parallel_comm", *why);
  if (const auto refusal = framework_switch_refusal(plan, PlanSources::command_line()))
    throw ValidationError(refusal->field, refusal->message);
  return plan;
}

std::string SearchSpace::describe() const {
  const auto num = [](auto v) { return fmt::format("{}", v); };
  const auto onoff = [](bool v) { return std::string(v ? "on" : "off"); };
  const auto sched = [](const ScheduleChoice& c) {
    return c.schedule == Schedule::INTERLEAVED ? fmt::format("interleaved/{}", c.vpp)
                                               : models::to_string(c.schedule);
  };
  const auto rec = [](Recompute r) { return models::to_string(r); };
  return fmt::format(
      "tp {} pp {} cp {} ep {} schedule {} mbs {} sp {} zero {} recompute {} "
      "overlap-grad-reduce {} overlap-param-gather {} tp-comm-overlap {}{}",
      list_text(tp_, num, input_, "tp"), list_text(pp_, num, input_, "pp"),
      list_text(cp_, num, input_, "cp"), list_text(ep_, num, input_, "ep"),
      list_text(schedule_, sched, input_, input_.has("vpp") ? "vpp" : "schedule"),
      list_text(mbs_, num, input_, "mbs"), list_text(sp_, onoff, input_, "sp"),
      list_text(zero_, num, input_, "zero"), list_text(recompute_, rec, input_, "recompute"),
      list_text(ogr_, onoff, input_, "overlap_grad_reduce"),
      list_text(opg_, onoff, input_, "overlap_param_gather"),
      list_text(tpo_, onoff, input_, "tp_comm_overlap"),
      moeo_.size() > 1 || (model_.is_moe() && input_.has("overlap_moe_expert_parallel_comm"))
          ? fmt::format(" overlap-moe-expert-parallel-comm {}",
                        list_text(moeo_, onoff, input_, "overlap_moe_expert_parallel_comm"))
          : std::string());
}

}  // namespace loom::strategies
