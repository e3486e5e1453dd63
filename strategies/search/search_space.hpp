#pragma once
// The search space of `loom search`: every plan over the dimensions the user leaves free,
// in one deterministic order with a stable index per candidate, so that the space can be
// split (threads, shards, ranks) and the pieces merged exactly.
//
// A candidate is a *shape* (the outer dimensions: tp, pp, cp, ep, schedule with its virtual
// stages, micro-batch size, sequence parallelism) and a *switch combination* (the inner
// ones: ZeRO stage, recompute policy, the overlap switches: the DP two, TP and, on MoE
// models, the EP all-to-all overlap). Its id is
// shape_index x switch_combinations() + switch_index, the shape index a mixed-radix number
// over the candidate lists (tp slowest). A dimension the input sets is pinned: its list
// holds the input's value alone. Values of the free dimensions: tp, pp and cp the divisors
// of the GPU count (pp at most the layers, cp at most seq / 2 and only for transformers),
// ep the divisors of the routed experts (MoE only), schedule 1f1b, gpipe, zb and
// interleaved with every divisor >= 2 of the layers as virtual stages, mbs the divisors of
// gbs, sp off/on, zero 0-3, recompute none/selective/full, each overlap off/on.
//
// What is not a plan is not enumerated: shapes whose tp x pp x cp does not divide the GPUs
// (there is no dp), a free switch that cannot act on a plan (sp or the TP overlap with tp 1;
// ZeRO, the gradient-reduce overlap with dp 1; the parameter-gather overlap without ZeRO
// 1/2), and GPipe and ZB-H1 with pp 1 (one stage: 1F1B's time, at most its memory). The EP
// all-to-all overlap's "on" that Megatron's rules void is counted invalid (switch_blocked). Every
// other combination is a candidate: resolve_plan and validate_plan decide
// whether it is valid (strategies/plan), naming the rule it breaks. When pp x vpp does not
// divide the layers and the split is free, the candidate gets the balanced split (the
// first and last virtual stages hold the fewer layers, as Megatron-LM's uneven splits put
// the embedding and the loss there).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/model_spec.hpp"
#include "models/training_plan.hpp"
#include "strategies/plan/plan_input.hpp"

namespace loom::strategies {

/// A pipeline schedule choice: the schedule and its virtual stages per rank.
struct ScheduleChoice {
  models::Schedule schedule = models::Schedule::ONE_F_ONE_B;
  int vpp = 1;
};

/// The outer dimensions of a candidate; an unset value is pinned (the input gives it).
struct PlanShape {
  std::optional<int> tp, pp, cp, ep;
  std::optional<ScheduleChoice> schedule;
  std::optional<std::int64_t> mbs;
  std::optional<bool> sp;
};

/// The inner dimensions of a candidate; an unset value is pinned.
struct PlanSwitches {
  std::optional<int> zero;
  std::optional<models::Recompute> recompute;
  std::optional<bool> overlap_grad_reduce, overlap_param_gather, tp_comm_overlap;
  std::optional<bool> overlap_moe_expert_parallel_comm;  ///< MoE models only
};

/// The candidates of one search (see file comment).
class SearchSpace {
 public:
  /// The space over `input`'s free dimensions for `model` on `gpus` GPUs. Throws PlanError on
  /// "gbs" when the input does not fix the global batch (the search compares plans training
  /// the same tokens per step), on "pipeline_split" when a split is given without pp.
  SearchSpace(const models::ModelSpec& model, PlanInput input, std::int64_t gpus,
              std::string_view cluster = "");

  /// Shape indices: 0 .. shapes() - 1.
  std::int64_t shapes() const { return shapes_; }
  /// Switch combinations per shape (the radix of the inner index).
  std::int64_t switch_combinations() const { return switch_combinations_; }
  /// The shape with index `index`; nullopt when it is not a plan (tp x pp x cp does not
  /// divide the GPUs, or gives another dp than a pinned one; a free sp with tp 1; a free
  /// GPipe or ZB-H1 schedule with pp 1).
  std::optional<PlanShape> shape(std::int64_t index) const;
  /// The input of a shape: the user's values with the shape's set (sources: the canonical
  /// flags) and, when needed, the balanced pipeline split.
  PlanInput shape_input(const PlanShape& shape) const;
  /// The shape's plan, resolved and validated. Throws PlanError (the rule it breaks) or
  /// ValidationError.
  models::TrainingPlan resolve(const PlanShape& shape) const;
  /// The switches with inner index `index` for a plan of tensor-parallel size `tp` and
  /// data-parallel size `dp`; nullopt when a free switch cannot act on it.
  std::optional<PlanSwitches> switches(std::int64_t index, int tp, int dp) const;
  /// Switch combinations enumerated for a plan of sizes `tp` and `dp`.
  std::int64_t switch_count(int tp, int dp) const;
  /// tp and dp of a shape as resolution would give them (for counting invalid shapes).
  std::pair<int, int> tp_dp(const PlanShape& shape) const;
  /// `plan` with `switches` applied (pinned ones keep the plan's value).
  static void apply(const PlanSwitches& switches, models::TrainingPlan& plan);
  /// Why a switch `switches` turns on cannot act on `plan` (after apply), as an invalid
  /// candidate's message; nullopt when every one acts. switches() sees only tp and dp; the EP
  /// all-to-all overlap also needs ep, a pipeline it can pair micro-batches in, two of them,
  /// no full recompute (moe_a2a_overlap_block), so such a candidate is counted invalid, by
  /// that rule.
  static std::optional<std::string> switch_blocked(const PlanSwitches& switches,
                                                   const models::TrainingPlan& plan);
  /// The plan of candidate `id`. Throws PlanError when it is invalid, ValidationError on an id
  /// that is not a candidate.
  models::TrainingPlan candidate(std::int64_t id) const;

  /// Whether the input fixes dp.
  bool dp_fixed() const { return pinned_dp_.has_value(); }
  /// How messages name the plan fields (the input's sources).
  const PlanSources& sources() const { return input_.sources(); }
  /// The GPUs every plan occupies.
  std::int64_t gpus() const { return gpus_; }
  /// "tp {1,2,4} pp {1,2} ...": the values of every free dimension, and the pinned ones.
  std::string describe() const;
  /// A fingerprint of the space (its description, the model, the cluster context named at
  /// construction, e.g. the cluster and network model, and every input value), equal across
  /// processes that build the same space: partial results must come from the same search to
  /// merge.
  const std::string& fingerprint() const { return fingerprint_; }
  /// The fixed part of every plan (the fields the search does not vary).
  const PlanInput& input() const { return input_; }

 private:
  const models::ModelSpec& model_;
  PlanInput input_;
  std::int64_t gpus_;
  std::optional<int> pinned_dp_;
  // The input's tp, pp, cp and ZeRO stage (1, 1, 1, 0 when it leaves them out), read once:
  // shape(), tp_dp() and switches() run for every candidate.
  int pinned_tp_ = 1, pinned_pp_ = 1, pinned_cp_ = 1, pinned_zero_ = 0;
  // The framework runs TP sequence-parallel (torchtitan, transformers): shapes with sp off
  // and tp > 1 are not enumerated.
  bool forced_sp_ = false;
  // Candidate lists of the outer dimensions (empty optional: pinned).
  std::vector<std::optional<int>> tp_, pp_, cp_, ep_;
  std::vector<std::optional<ScheduleChoice>> schedule_;
  std::vector<std::optional<std::int64_t>> mbs_;
  std::vector<std::optional<bool>> sp_;
  // Inner lists.
  std::vector<std::optional<int>> zero_;
  std::vector<std::optional<models::Recompute>> recompute_;
  std::vector<std::optional<bool>> ogr_, opg_, tpo_, moeo_;
  std::int64_t shapes_ = 0;
  std::int64_t switch_combinations_ = 0;
  std::string fingerprint_;
};

}  // namespace loom::strategies
