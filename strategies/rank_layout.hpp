#pragma once
// Rank layout: how global ranks split into the process groups of a plan, following
// Megatron-LM's RankGenerator (megatron/core/parallel_state.py): the dimensions are laid out
// in an order string, first = fastest-varying ("tp-cp-ep-dp-pp" is Megatron's default, TP
// fastest). Dense groups (tp, cp, dp, pp) use tp x cp x dp x pp with ep removed; expert groups
// (ep, and the expert data-parallel "edp") use etp x ep x (tp*dp*cp/(etp*ep)) x pp, as
// Megatron-core's expert RankGenerator does (etp = expert tensor parallel, tp by default). Knows
// nothing about hardware; `on_nvlink` takes a cluster.
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "models/parallel_dim.hpp"
#include "models/training_plan.hpp"
#include "topologies/cluster.hpp"

namespace loom::strategies {

/// The project's one parallel-dimension enum (models/parallel_dim.hpp).
using models::Dim;
using models::to_string;

/// Global rank -> coordinates and process groups.
class RankLayout {
 public:
  /// Sizes from a plan; `order` is a permutation of tp, cp, ep, dp, pp joined by '-'.
  /// Throws ValidationError on "order" for a bad order, on a size below 1, and on "ep" when
  /// etp x ep does not divide tp x dp x cp; messages spell the fields as `names` does.
  explicit RankLayout(const models::TrainingPlan& plan, std::string_view order = "tp-cp-ep-dp-pp",
                      const FieldNames& names = {});
  /// Sizes given one by one; expert tensor parallelism equals tp.
  RankLayout(int tp, int cp, int ep, int dp, int pp, std::string_view order = "tp-cp-ep-dp-pp",
             const FieldNames& names = {});

  /// GPUs the layout covers: tp x cp x dp x pp (ep is carved out of dp x cp).
  int world_size() const { return tp_ * cp_ * dp_ * pp_; }
  /// Size of one group of `dim`.
  int size(Dim dim) const;
  /// The order string, normalised ("tp-cp-ep-dp-pp").
  const std::string& order() const { return order_; }

  /// Every group of `dim`, each a list of global ranks in ascending coordinate order; groups
  /// in Megatron's order.
  std::vector<std::vector<int>> groups(Dim dim) const;
  /// Groups spanning several dimensions at once (e.g. {TP, PP}: model-parallel groups).
  std::vector<std::vector<int>> groups(const std::vector<Dim>& dims) const;
  /// The group of `dim` that holds `rank`. Throws ValidationError when out of range.
  std::vector<int> group_of(int rank, Dim dim) const;
  /// Coordinate of `rank` along `dim` (its index in its group). Throws ValidationError.
  int coordinate(int rank, Dim dim) const;
  /// The coordinate of every rank along `dim`, indexed by rank (one pass over the groups).
  std::vector<int> coordinates(Dim dim) const;

  /// Whether every group of `dim` stays inside one NVLink domain of `cluster`. Throws
  /// ValidationError on "cluster" when the cluster has fewer GPUs than the layout.
  bool on_nvlink(Dim dim, const topo::Cluster& cluster) const;
  /// Whether `group` (global ranks) stays inside one NVLink domain.
  static bool group_on_nvlink(const std::vector<int>& group, const topo::Cluster& cluster);

  /// The ranks r with r % stride == offset, e.g. the even ranks (2, 0); a sub-group as the
  /// seed documents use them. Throws ValidationError on stride < 1 or offset out of range.
  std::vector<int> strided_subgroup(int stride, int offset) const;

 private:
  // Megatron's generate_masked_orthogonal_rank_groups over `sizes` (fastest first).
  static std::vector<std::vector<int>> masked_groups(int world, const std::vector<int>& sizes,
                                                     const std::vector<bool>& mask);
  void check_rank(int rank) const;
  // The sizes, with the expert tensor-parallel size etp.
  struct Sizes {
    int tp, etp, cp, ep, dp, pp;
  };
  RankLayout(const Sizes& sizes, std::string_view order, const FieldNames& names);

  int tp_, etp_, cp_, ep_, dp_, pp_;
  std::string order_;
  std::vector<Dim> dims_;  // order, fastest first (all five)
};

/// Parses an order string like "tp-cp-ep-dp-pp": tp, cp, ep, dp, pp, each at most once;
/// missing ones are appended at the end (as Megatron does; they must then have size 1).
/// Throws ValidationError on "order" (spelled as `names` does).
std::vector<Dim> parse_order(std::string_view order, const FieldNames& names = {});

}  // namespace loom::strategies
