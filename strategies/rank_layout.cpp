#include "strategies/rank_layout.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "common/error.hpp"
#include "common/strings.hpp"

namespace loom::strategies {

std::vector<Dim> parse_order(std::string_view order, const FieldNames& names) {
  // The dimensions an order names (EDP follows from EP and DP).
  constexpr Dim ORDERABLE[] = {Dim::TP, Dim::CP, Dim::EP, Dim::DP, Dim::PP};
  std::vector<Dim> dims;
  std::stringstream in{std::string(order)};
  std::string item;
  const std::string field = names("order");
  auto bad = [&](const std::string& why) {
    return ValidationError(field,
                           fmt::format("{}: invalid value '{}' ({}); allowed: tp, cp, ep, "
                                       "dp, pp joined by '-', each once, e.g. tp-cp-ep-dp-pp",
                                       field, order, why));
  };
  // getline drops a trailing empty item; an order ending in '-' names an empty dimension
  // just as one starting with '-' does.
  if (!order.empty() && order.back() == '-') throw bad("unknown dimension ''");
  while (std::getline(in, item, '-')) {
    auto it = std::find_if(std::begin(ORDERABLE), std::end(ORDERABLE),
                           [&](Dim d) { return to_string(d) == item; });
    if (it == std::end(ORDERABLE)) throw bad(fmt::format("unknown dimension '{}'", item));
    const Dim d = *it;
    if (std::find(dims.begin(), dims.end(), d) != dims.end())
      throw bad(fmt::format("'{}' given twice", item));
    dims.push_back(d);
  }
  if (dims.empty()) throw bad("empty");
  for (Dim d : ORDERABLE)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) dims.push_back(d);
  return dims;
}

RankLayout::RankLayout(const models::TrainingPlan& plan, std::string_view order,
                       const FieldNames& names)
    : RankLayout(Sizes{plan.tp, plan.expert_tp(), plan.cp, plan.ep, plan.dp, plan.pp}, order,
                 names) {}

RankLayout::RankLayout(int tp, int cp, int ep, int dp, int pp, std::string_view order,
                       const FieldNames& names)
    : RankLayout(Sizes{tp, tp, cp, ep, dp, pp}, order, names) {}

RankLayout::RankLayout(const Sizes& z, std::string_view order, const FieldNames& names)
    : tp_(z.tp), etp_(z.etp), cp_(z.cp), ep_(z.ep), dp_(z.dp), pp_(z.pp) {
  const int tp = z.tp, cp = z.cp, ep = z.ep, dp = z.dp;
  for (auto [v, key] : {std::pair{tp, "tp"}, std::pair{z.etp, "etp"}, std::pair{cp, "cp"},
                        std::pair{ep, "ep"}, std::pair{dp, "dp"}, std::pair{z.pp, "pp"}}) {
    if (v < 1) throw ValidationError::not_positive(names(key), std::to_string(v));
  }
  if (z.etp != tp && (tp * dp * cp) % (z.etp * ep) != 0) {
    // Megatron-core parallel_state.py: the expert RankGenerator needs etp x ep x pp to divide
    // the world.
    throw ValidationError(
        names("ep"), fmt::format("{} {} x {} {} does not divide {} {} x {} {} x {} {}; expert "
                                 "parallelism is carved out of tp x dp x cp",
                                 names("etp"), z.etp, names("ep"), ep, names("tp"), tp, names("dp"),
                                 dp, names("cp"), cp));
  }
  if (z.etp == tp && (dp * cp) % ep != 0) {
    throw ValidationError(names("ep"),
                          fmt::format("{} {} does not divide {} {} x {} {} = {}; expert "
                                      "parallelism is carved out of dp x cp",
                                      names("ep"), ep, names("dp"), dp, names("cp"), cp, dp * cp));
  }
  dims_ = parse_order(order, names);
  // Megatron: a dimension left out of the order must have size 1.
  const auto given = static_cast<size_t>(std::count(order.begin(), order.end(), '-') + 1);
  for (size_t i = given; i < dims_.size(); ++i) {
    if (size(dims_[i]) != 1) {
      throw ValidationError(
          names("order"), fmt::format("{} '{}' leaves out {} but its size is {}; include it",
                                      names("order"), order, to_string(dims_[i]), size(dims_[i])));
    }
  }
  std::vector<std::string> parts;
  for (Dim d : dims_) parts.push_back(to_string(d));
  order_ = join(parts, "-");
}

int RankLayout::size(Dim dim) const {
  switch (dim) {
    case Dim::TP:
      return tp_;
    case Dim::CP:
      return cp_;
    case Dim::EP:
      return ep_;
    case Dim::DP:
      return dp_;
    case Dim::PP:
      return pp_;
    case Dim::EDP:
      return tp_ * dp_ * cp_ / (etp_ * ep_);
  }
  return 1;
}

std::vector<std::vector<int>> RankLayout::masked_groups(int world, const std::vector<int>& sizes,
                                                        const std::vector<bool>& mask) {
  // Megatron-LM generate_masked_orthogonal_rank_groups: the masked dimensions vary inside a
  // group, the others index the group; strides are prefix products of the sizes.
  std::vector<int> stride(sizes.size());
  int acc = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    stride[i] = acc;
    acc *= sizes[i];
  }
  std::vector<int> in_shape, in_stride, out_shape, out_stride;
  for (size_t i = 0; i < sizes.size(); ++i) {
    (mask[i] ? in_shape : out_shape).push_back(sizes[i]);
    (mask[i] ? in_stride : out_stride).push_back(stride[i]);
  }
  int group_size = 1;
  for (int s : in_shape) group_size *= s;
  const int groups = world / group_size;
  auto offset = [](int index, const std::vector<int>& shape, const std::vector<int>& strides) {
    int total = 0;
    for (size_t i = 0; i < shape.size(); ++i) {
      total += (index % shape[i]) * strides[i];
      index /= shape[i];
    }
    return total;
  };
  std::vector<std::vector<int>> out(static_cast<size_t>(groups));
  for (int g = 0; g < groups; ++g) {
    const int base = offset(g, out_shape, out_stride);
    auto& group = out[static_cast<size_t>(g)];
    group.reserve(static_cast<size_t>(group_size));
    for (int r = 0; r < group_size; ++r) group.push_back(base + offset(r, in_shape, in_stride));
  }
  return out;
}

std::vector<std::vector<int>> RankLayout::groups(const std::vector<Dim>& want) const {
  const bool expert =
      std::any_of(want.begin(), want.end(), [](Dim d) { return d == Dim::EP || d == Dim::EDP; });
  if (expert &&
      std::any_of(want.begin(), want.end(), [](Dim d) { return d == Dim::CP || d == Dim::DP; })) {
    throw ValidationError("groups", "expert groups (ep, edp) cannot be combined with cp or dp");
  }
  std::vector<int> sizes;
  std::vector<bool> mask;
  for (Dim d : dims_) {
    // Dense layout: tp, cp, ep=1, dp, pp. Expert layout: etp, cp=1, ep, edp, pp.
    int s = size(d);
    Dim as = d;
    if (!expert && d == Dim::EP) s = 1;
    if (expert && d == Dim::TP) s = etp_;
    if (expert && d == Dim::CP) s = 1;
    if (expert && d == Dim::DP) {
      s = size(Dim::EDP);
      as = Dim::EDP;
    }
    sizes.push_back(s);
    mask.push_back(std::find(want.begin(), want.end(), as) != want.end());
  }
  return masked_groups(world_size(), sizes, mask);
}

std::vector<std::vector<int>> RankLayout::groups(Dim dim) const {
  return groups(std::vector<Dim>{dim});
}

void RankLayout::check_rank(int rank) const {
  if (rank < 0 || rank >= world_size()) {
    throw ValidationError("rank", fmt::format("rank {} is out of range; the plan has ranks 0..{}",
                                              rank, world_size() - 1));
  }
}

std::vector<int> RankLayout::group_of(int rank, Dim dim) const {
  check_rank(rank);
  for (auto& g : groups(dim))
    if (std::find(g.begin(), g.end(), rank) != g.end()) return g;
  throw InternalError("rank layout: a rank belongs to no group");
}

int RankLayout::coordinate(int rank, Dim dim) const {
  auto g = group_of(rank, dim);
  return static_cast<int>(std::find(g.begin(), g.end(), rank) - g.begin());
}

std::vector<int> RankLayout::coordinates(Dim dim) const {
  std::vector<int> out(static_cast<size_t>(world_size()), 0);
  for (const auto& g : groups(dim))
    for (size_t k = 0; k < g.size(); ++k) out[static_cast<size_t>(g[k])] = static_cast<int>(k);
  return out;
}

bool RankLayout::group_on_nvlink(const std::vector<int>& group, const topo::Cluster& cluster) {
  if (group.empty()) return true;
  const int domain = cluster.nvlink_domain(group.front());
  return std::all_of(group.begin(), group.end(),
                     [&](int r) { return cluster.nvlink_domain(r) == domain; });
}

bool RankLayout::on_nvlink(Dim dim, const topo::Cluster& cluster) const {
  if (cluster.num_gpus() < world_size()) {
    throw ValidationError("cluster", fmt::format("the plan needs {} GPUs but the cluster has {}",
                                                 world_size(), cluster.num_gpus()));
  }
  for (const auto& g : groups(dim))
    if (!group_on_nvlink(g, cluster)) return false;
  return true;
}

std::vector<int> RankLayout::strided_subgroup(int stride, int offset) const {
  if (stride < 1) throw ValidationError::not_positive("stride", std::to_string(stride));
  if (offset < 0 || offset >= stride) {
    throw ValidationError("offset", fmt::format("offset {} must be in 0..{}", offset, stride - 1));
  }
  std::vector<int> out;
  for (int r = offset; r < world_size(); r += stride) out.push_back(r);
  return out;
}

}  // namespace loom::strategies
