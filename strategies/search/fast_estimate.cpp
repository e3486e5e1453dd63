#include "strategies/search/fast_estimate.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "common/error.hpp"
#include "common/units.hpp"
#include "models/flops.hpp"
#include "sim/fabric.hpp"
#include "strategies/memory_plan.hpp"
#include "strategies/rank_layout.hpp"
#include "strategies/schedule.hpp"
#include "strategies/search/fast_model.hpp"
#include "strategies/step/lower_passes.hpp"
#include "strategies/step/step_graph.hpp"
#include "strategies/step/zero_offload.hpp"

namespace loom::strategies {
namespace {

using models::Dim;

// The two sizes at which data-parallel collectives are timed exactly, bytes.
constexpr double DP_ANCHOR_LOW = 64 * MiB;
constexpr double DP_ANCHOR_HIGH = GiB;

GroupKind group_kind(Dim dim) {
  switch (dim) {
    case Dim::CP:
      return GroupKind::CP;
    case Dim::EP:
      return GroupKind::EP;
    default:
      return GroupKind::TP;
  }
}

// The data-parallel groups of the peers of `rank` along `peer_dims` (the concurrent twins
// stage_groups gives a symmetric-mode DP collective), from the groups of `dim` indexed by
// member.
std::vector<std::vector<int>> twin_groups(const RankLayout& layout, int rank, Dim dim,
                                          std::initializer_list<Dim> peer_dims) {
  const auto all = layout.groups(dim);
  std::vector<int> owner(static_cast<size_t>(layout.world_size()), -1);
  for (size_t g = 0; g < all.size(); ++g)
    for (int r : all[g]) owner[static_cast<size_t>(r)] = static_cast<int>(g);
  std::vector<std::vector<int>> out;
  for (Dim d : peer_dims)
    for (int peer : layout.group_of(rank, d))
      if (peer != rank) out.push_back(all[static_cast<size_t>(owner[static_cast<size_t>(peer)])]);
  return out;
}

// Passes of each kind (F, B or Bi, W) in `order` from `begin` to `end`.
std::array<int, 3> count_passes(const std::vector<Pass>& order, size_t begin, size_t end) {
  std::array<int, 3> n{};
  for (size_t i = begin; i < end; ++i) {
    const PassKind k = order[i].kind;
    ++n[k == PassKind::FORWARD ? 0 : k == PassKind::BACKWARD_WEIGHT ? 2 : 1];
  }
  return n;
}

}  // namespace

void UnitTimes::add(const UnitTimes& o, double times) {
  fwd += times * o.fwd;
  bwd_input += times * o.bwd_input;
  bwd_weight += times * o.bwd_weight;
  recompute += times * o.recompute;
  fwd_tp += times * o.fwd_tp;
  fwd_ep += times * o.fwd_ep;
  fwd_other += times * o.fwd_other;
  bwd_tp += times * o.bwd_tp;
  bwd_ep += times * o.bwd_ep;
  bwd_other += times * o.bwd_other;
  rec_tp += times * o.rec_tp;
  fwd_tpx += times * o.fwd_tpx;
  bwd_tpx += times * o.bwd_tpx;
  rec_tpx += times * o.rec_tpx;
  fwd_cpo += times * o.fwd_cpo;
  bwd_cpo += times * o.bwd_cpo;
  rec_cpo += times * o.rec_cpo;
  rec_ep += times * o.rec_ep;
  rec_other += times * o.rec_other;
  params += times * o.params;
  expert_params += times * o.expert_params;
}

LayerKey layer_key(const models::TrainingPlan& p) {
  const bool cast_share = p.fp8_weight_cache && models::low_precision_linears(p.precision);
  // The split is the search's balanced one for (pp, vpp) unless the user pinned it (then
  // the same for every candidate).
  const bool by_chunk = p.recompute == models::Recompute::FULL &&
                        p.recompute_method == models::RecomputeMethod::BLOCK;
  return {p.tp,
          p.cp,
          p.ep,
          p.mbs,
          p.sp,
          static_cast<int>(p.recompute),
          p.pp == 1,
          cast_share ? p.micro_batches() : 0,
          by_chunk ? p.pp : 0,
          by_chunk ? p.vpp : 0,
          p.tp_comm_overlap && p.tp > 1,
          static_cast<int>(p.cp_comm_type)};
}

namespace {
std::size_t mix(std::size_t h, std::uint64_t v) {
  // boost::hash_combine's mixing step, on 64 bits.
  return h ^ (std::hash<std::uint64_t>{}(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
}
std::size_t hash_line(int kind, const std::array<int, 4>& by, int op) {
  std::size_t h = mix(0, static_cast<std::uint64_t>(kind));
  for (int d : by) h = mix(h, static_cast<std::uint64_t>(static_cast<std::uint32_t>(d)));
  return mix(h, static_cast<std::uint64_t>(op));
}
}  // namespace

std::size_t CollectiveKeyHash::operator()(const CollectiveKey& k) const noexcept {
  return mix(hash_line(std::get<0>(k), std::get<1>(k), std::get<2>(k)),
             std::bit_cast<std::uint64_t>(std::get<3>(k)));
}

std::size_t CollectiveLineKeyHash::operator()(const CollectiveLineKey& k) const noexcept {
  return hash_line(std::get<0>(k), std::get<1>(k), std::get<2>(k));
}

std::optional<double> SharedCollectiveTimes::find(const CollectiveKey& key) const {
  const std::lock_guard<std::mutex> lock(mutex_);
  const auto it = times_.find(key);
  if (it == times_.end()) return std::nullopt;
  return it->second;
}

void SharedCollectiveTimes::insert(const CollectiveKey& key, double seconds) {
  const std::lock_guard<std::mutex> lock(mutex_);
  times_.emplace(key, seconds);
}

const models::MemoryOps& SharedCollectiveTimes::memory_ops(const LayerKey& key,
                                                           const models::ModelSpec& model,
                                                           const models::TrainingPlan& plan) {
  {
    const std::lock_guard<std::mutex> lock(ops_mutex_);
    const auto it = ops_.find(key);
    if (it != ops_.end()) return *it->second;
  }
  // Built outside the lock (other threads keep looking up); a second build of the same key
  // by a racing thread is dropped and the first kept.
  auto ops = std::make_unique<const models::MemoryOps>(models::memory_ops(model, plan));
  const std::lock_guard<std::mutex> lock(ops_mutex_);
  return *ops_.emplace(key, std::move(ops)).first->second;
}

std::size_t SharedCollectiveTimes::memory_ops_built() const {
  const std::lock_guard<std::mutex> lock(ops_mutex_);
  return ops_.size();
}

FastCaches::FastCaches(const models::ModelSpec& m, const topo::Cluster& c, const SimulateOptions& o,
                       std::shared_ptr<SharedCollectiveTimes> s)
    : model(m),
      cluster(c),
      options(o),
      kernels(o.kernels ? o.kernels
                        : std::make_shared<topo::DatasheetKernelModel>(c.gpu, o.efficiency)),
      engine(c, engine_options(o)),
      slowdown(overlap_slowdown(c.gpu)),
      shared(s ? std::move(s) : std::make_shared<SharedCollectiveTimes>()) {
  for (int b = 0; b < models::LAYER_KINDS; ++b) {
    std::vector<int>& before = block_layers_before[static_cast<size_t>(b)];
    before.assign(static_cast<size_t>(m.layers) + 1, 0);
    for (int l = 0; l < m.layers; ++l)
      before[static_cast<size_t>(l) + 1] =
          before[static_cast<size_t>(l)] + (static_cast<int>(m.layer_kind(l)) == b ? 1 : 0);
    if (before.back() > 0) blocks_present.push_back(b);
  }
}

const models::MemoryOps& FastCaches::memory_ops(const models::TrainingPlan& p) {
  const LayerKey key = layer_key(p);
  auto it = memory_ops_.find(key);
  if (it == memory_ops_.end())
    it = memory_ops_.emplace(key, &shared->memory_ops(key, model, p)).first;
  return *it->second;
}

const ScheduleFacts& FastCaches::schedule(const models::TrainingPlan& p) {
  const ScheduleKey key{static_cast<int>(p.schedule), p.pp, p.micro_batches(), p.vpp};
  auto it = schedules_.find(key);
  if (it != schedules_.end()) return it->second;
  const PipelineSchedule sched =
      build_schedule(p.schedule, p.pp, static_cast<int>(p.micro_batches()), p.vpp);
  ScheduleFacts f;
  f.after_final.resize(static_cast<size_t>(p.pp));
  f.before_first.resize(static_cast<size_t>(p.pp));
  for (int s = 0; s < p.pp; ++s) {
    const auto& order = sched.per_stage[static_cast<size_t>(s)];
    f.in_flight.push_back(peak_in_flight(sched, s));
    for (int c = 0; c < p.vpp; ++c) {
      size_t final_pass = 0, first_forward = order.size();
      for (size_t i = 0; i < order.size(); ++i) {
        if (order[i].chunk != c) continue;
        if (ends_weight_gradients(order[i])) final_pass = i;
        if (order[i].kind == PassKind::FORWARD && first_forward == order.size()) first_forward = i;
      }
      f.after_final[static_cast<size_t>(s)].push_back(
          count_passes(order, final_pass + 1, order.size()));
      f.before_first[static_cast<size_t>(s)].push_back(count_passes(order, 0, first_forward));
    }
  }
  return schedules_.emplace(key, std::move(f)).first->second;
}

const LayoutGroups& FastCaches::layout(const models::TrainingPlan& p) {
  const LayoutKey key{p.tp, p.cp, p.ep, p.dp, p.pp};
  auto it = layouts_.find(key);
  if (it != layouts_.end()) return it->second;
  const RankLayout layout(p);
  LayoutGroups g;
  g.id = static_cast<int>(layouts_.size());
  // The representative of stage 0 is rank 0 (coordinates 0 in every dimension).
  g.groups[static_cast<size_t>(GroupKind::TP)] = layout.group_of(0, Dim::TP);
  g.groups[static_cast<size_t>(GroupKind::CP)] = layout.group_of(0, Dim::CP);
  g.groups[static_cast<size_t>(GroupKind::EP)] = layout.group_of(0, Dim::EP);
  g.groups[static_cast<size_t>(GroupKind::DP)] = layout.group_of(0, Dim::DP);
  g.groups[static_cast<size_t>(GroupKind::EDP)] = layout.group_of(0, Dim::EDP);
  if (p.pp > 1) g.groups[static_cast<size_t>(GroupKind::P2P)] = {0, layout.group_of(0, Dim::PP)[1]};
  // Megatron's order tp-cp-ep-dp-pp (TP fastest): rank 0's groups and their twins.
  g.decided_by[static_cast<size_t>(GroupKind::TP)] = {p.tp, 0, 0, 0};
  g.decided_by[static_cast<size_t>(GroupKind::CP)] = {p.tp, p.cp, 0, 0};
  g.decided_by[static_cast<size_t>(GroupKind::EP)] = {p.expert_tp(), p.ep, 0, 0};
  g.decided_by[static_cast<size_t>(GroupKind::DP)] = {p.tp, p.cp, p.dp, 0};
  g.decided_by[static_cast<size_t>(GroupKind::EDP)] = {p.tp, p.cp, p.dp, p.ep};
  g.decided_by[static_cast<size_t>(GroupKind::P2P)] = {p.tp * p.cp * p.dp, 0, 0, 0};
  if (p.dp > 1) {
    g.dp_concurrent = twin_groups(layout, 0, Dim::DP, {Dim::TP, Dim::CP});
    if (g.groups[static_cast<size_t>(GroupKind::EDP)].size() > 1)
      g.edp_concurrent = twin_groups(layout, 0, Dim::EDP, {Dim::TP, Dim::EP});
  }
  return layouts_.emplace(key, std::move(g)).first->second;
}

double FastCaches::collective_s(const LayoutGroups& g, GroupKind kind, sim::CollectiveOp op,
                                double bytes) {
  const std::vector<int>& ranks = g.groups[static_cast<size_t>(kind)];
  if (ranks.size() < 2 || bytes <= 0) return 0.0;
  // Data-parallel sizes follow the parameters (a partial bucket, a unit), so they take any
  // value, and one collective over thousands of ranks costs milliseconds to lower. In the
  // bandwidth regime a collective's time is affine in its size (latency + bytes / algBw;
  // all-gather and reduce-scatter run as rings): they are timed exactly at two sizes,
  // 64 MiB and 1 GiB, and on the line through them (never below the smaller one's latency).
  if ((kind == GroupKind::DP || kind == GroupKind::EDP) && bytes != DP_ANCHOR_LOW &&
      bytes != DP_ANCHOR_HIGH) {
    const CollectiveLineKey line{static_cast<int>(kind), g.decided_by[static_cast<size_t>(kind)],
                                 static_cast<int>(op)};
    auto it = dp_lines_.find(line);
    if (it == dp_lines_.end()) {
      const double t0 = collective_s(g, kind, op, DP_ANCHOR_LOW);
      const double t1 = collective_s(g, kind, op, DP_ANCHOR_HIGH);
      const double slope = (t1 - t0) / (DP_ANCHOR_HIGH - DP_ANCHOR_LOW);
      it = dp_lines_.emplace(line, std::make_pair(std::max(t0 - slope * DP_ANCHOR_LOW, 0.0), slope))
               .first;
    }
    return it->second.first + it->second.second * bytes;
  }
  const auto key = std::make_tuple(static_cast<int>(kind), g.decided_by[static_cast<size_t>(kind)],
                                   static_cast<int>(op), bytes);
  auto it = collectives_.find(key);
  if (it != collectives_.end()) return it->second;
  if (const auto known = shared->find(key)) {
    collectives_.emplace(key, *known);
    return *known;
  }
  sim::CollectiveRequest req;
  req.op = op;
  req.ranks = ranks;
  req.bytes = bytes;
  if (kind == GroupKind::P2P) {
    req.root = 0;
    req.algorithm = sim::Algorithm::DIRECT;  // as Engine::add_transfer lowers a transfer
  }
  if (kind == GroupKind::DP) req.concurrent_groups = g.dp_concurrent;
  if (kind == GroupKind::EDP) req.concurrent_groups = g.edp_concurrent;
  const double t = sim::to_seconds(engine.frozen_time(req));
  collectives_.emplace(key, t);
  shared->insert(key, t);
  return t;
}

const UnitTimeSet& FastCaches::unit_times(const models::TrainingPlan& p) {
  const LayoutGroups& g = layout(p);
  const auto key = std::make_pair(layer_key(p), g.id);
  auto it = unit_times_.find(key);
  if (it != unit_times_.end()) return it->second;
  const int ep_nodes =
      flex_exchange_nodes(p, cluster, g.groups[static_cast<size_t>(GroupKind::EP)]);
  const auto cost_key = std::make_pair(key.first, ep_nodes);
  auto ct = costs_.find(cost_key);
  if (ct == costs_.end()) {
    const double host_s = pass_host_launch_s(p, options.host_launch_s, cluster.gpu);
    LayerCosts lc;
    const auto emb = models::embedding_ops(model, p);
    if (!emb.empty())
      lc.variants[static_cast<size_t>(UnitKind::EMBEDDING)].push_back(
          {cost_ops(emb, p, *kernels, OpList::EMBEDDING, host_s), 1});
    // cost_stages costs the first layer of each variant (LayerCostKey: recomputed or not,
    // attention window, kept in bf16) and reuses it for the others; the fast tier blends a
    // kind's variants by their share of its layers (and a block's, for the chunk sums).
    struct Found {
      LayerCostKey key;
      int count;
      PassCost cost;
    };
    std::array<std::vector<Found>, UNIT_KINDS> found;
    std::array<int, UNIT_KINDS> layers{};
    for (int l = 0; l < model.layers; ++l) {
      const auto kind =
          static_cast<size_t>(model.is_moe_layer(l) ? UnitKind::MOE : UnitKind::DENSE);
      const LayerCostKey key = layer_cost_key(model, p, l);
      ++layers[kind];
      auto it = std::find_if(found[kind].begin(), found[kind].end(),
                             [&](const Found& f) { return f.key == key; });
      if (it != found[kind].end()) {
        ++it->count;
        continue;
      }
      found[kind].push_back({key, 1,
                             cost_ops(models::layer_ops(model, p, l), p, *kernels, OpList::LAYER,
                                      host_s, key.recomputed, ep_nodes)});
    }
    // A group of variants blended by their share of `total` layers, in the group's order.
    const auto blend = [](const std::vector<const Found*>& group, int total) {
      std::vector<LayerVariant> out;
      double rest = 1;
      for (size_t i = 0; i < group.size(); ++i) {
        // The last share is what the others leave, so two variants split as share, 1 - share.
        const double share =
            i + 1 == group.size() ? rest : static_cast<double>(group[i]->count) / total;
        rest -= share;
        out.push_back({group[i]->cost, share});
      }
      return out;
    };
    std::array<std::array<std::vector<const Found*>, 2>, models::LAYER_KINDS> by_block;
    std::array<std::array<int, 2>, models::LAYER_KINDS> block_layers{};
    for (size_t k = 0; k < UNIT_KINDS; ++k) {
      std::stable_partition(found[k].begin(), found[k].end(),
                            [](const Found& f) { return f.key.recomputed; });
      std::vector<const Found*> group;
      for (const Found& f : found[k]) {
        group.push_back(&f);
        by_block[static_cast<size_t>(f.key.kind)][f.key.bf16 ? 1 : 0].push_back(&f);
        block_layers[static_cast<size_t>(f.key.kind)][f.key.bf16 ? 1 : 0] += f.count;
      }
      for (LayerVariant& v : blend(group, layers[k])) lc.variants[k].push_back(std::move(v));
    }
    for (size_t b = 0; b < models::LAYER_KINDS; ++b)
      for (size_t kept = 0; kept < 2; ++kept)
        lc.blocks[b][kept] = blend(by_block[b][kept], block_layers[b][kept]);
    lc.variants[static_cast<size_t>(UnitKind::HEAD)].push_back(
        {cost_ops(models::head_ops(model, p), p, *kernels, OpList::HEAD, host_s, true, ep_nodes),
         1});
    ct = costs_.emplace(cost_key, std::move(lc)).first;
  }
  UnitTimeSet out{};
  const models::ModelSpec& m = model;
  const auto times_of = [&](const PassCost& c) {
    UnitTimes u;
    u.fwd = c.fwd_s;
    u.bwd_input = c.bwd_input_s;
    u.bwd_weight = c.bwd_weight_s;
    u.recompute = c.recompute_s;
    u.params = c.params;
    const int sms = cluster.gpu.sm_count;
    const bool cpo = cp_overlapped(p);
    const auto comm = [&](const std::vector<CommItem>& items, double& tp, double& ep, double& other,
                          double& tpx, double& cp) {
      for (const CommItem& item : items) {
        const GroupKind kind = group_kind(item.dim);
        const double t = collective_s(g, kind, item.op, item.bytes);
        const bool ring = cpo && item.dim == Dim::CP;
        (item.dim == Dim::TP ? tp : item.dim == Dim::EP ? ep : ring ? cp : other) += t;
        if (item.dim == Dim::TP ? !(p.tp_comm_overlap && p.tp > 1) : !ring) continue;
        tpx += tp_overlap_exposed_s(item.tp_overlap, t, sms);
      }
    };
    comm(c.fwd_comm, u.fwd_tp, u.fwd_ep, u.fwd_other, u.fwd_tpx, u.fwd_cpo);
    comm(c.bwd_comm, u.bwd_tp, u.bwd_ep, u.bwd_other, u.bwd_tpx, u.bwd_cpo);
    comm(c.recompute_comm, u.rec_tp, u.rec_ep, u.rec_other, u.rec_tpx, u.rec_cpo);
    return u;
  };
  // The first layer that `is_kind` accepts (the model's layer count if none).
  const auto first_layer = [&](const auto& is_kind) {
    int first = 0;
    while (first < m.layers && !is_kind(first)) ++first;
    return first;
  };
  // The routed experts' parameters (reduced over EDP), as step_graph's expert_params: the
  // first MoE layer's (of the block), which the memory model's inputs already hold.
  for (size_t k = 0; k < UNIT_KINDS; ++k) {
    const std::vector<LayerVariant>& variants = ct->second.variants[k];
    if (variants.empty()) continue;
    UnitTimes& u = out.units[k];
    for (const LayerVariant& v : variants) u.add(times_of(v.cost), v.share);  // one: share 1
    if (k == static_cast<size_t>(UnitKind::MOE) && p.ep > 1)
      u.expert_params = memory_ops(p)
                            .layer(m, p, first_layer([&](int l) { return m.is_moe_layer(l); }))
                            .expert_params;
  }
  for (const int b : blocks_present) {
    const int first = first_layer([&](int l) { return static_cast<int>(m.layer_kind(l)) == b; });
    for (size_t kept = 0; kept < 2; ++kept) {
      UnitTimes& u = out.blocks[static_cast<size_t>(b)][kept];
      for (const LayerVariant& v : ct->second.blocks[static_cast<size_t>(b)][kept])
        u.add(times_of(v.cost), v.share);
      if (p.ep > 1 && m.is_moe_layer(first))
        u.expert_params = memory_ops(p).layer(m, p, first).expert_params;
    }
  }
  return unit_times_.emplace(key, out).first->second;
}

double FastCaches::host_link_Bps() {
  if (offload_Bps_ <= 0) {
    const topo::VertexId gpu = cluster.gpu_vertex(0);
    const topo::Path path = cluster.route(gpu, nearest_cpu(cluster, gpu));
    // The bottleneck link at its payload rate (sim::LinkEfficiency, as the flows run).
    offload_Bps_ = std::numeric_limits<double>::infinity();
    const sim::LinkEfficiency eff;
    for (topo::LinkId l : path.links) {
      const topo::Link& link = cluster.link(l);
      offload_Bps_ = std::min(offload_Bps_, link.bandwidth_Bps * eff.of(link.kind));
    }
  }
  return offload_Bps_;
}

double FastCaches::offload_copy_s(const models::TrainingPlan& p) {
  host_link_Bps();
  // The offloaded layers' mean stored bytes (a hybrid's blocks, or a first layer kept in
  // bf16, store more or less than the others).
  const models::MemoryOps& mops = memory_ops(p);
  const int n = std::clamp(p.cpu_offloading_num_layers, 1, model.layers);
  double bytes = 0;
  for (int l = 0; l < n; ++l) bytes += mops.layer(model, p, l).stored_bytes;
  return bytes / n / offload_Bps_;
}

double FastCaches::copy_s(const models::TrainingPlan& p, double bytes) const {
  if (bytes <= 0) return 0.0;
  topo::KernelOp op;
  op.kind = topo::KernelKind::MEMORY_BOUND;
  op.bytes = bytes;
  return kernels->seconds(op, topo::KernelPass::FORWARD, compute_dtype(p.precision));
}

double FastCaches::optimizer_s(const models::TrainingPlan& p, double params) {
  if (p.offload_optimizer == models::Offload::CPU) {
    const double bytes =
        params * (offload_grad_bytes_per_elem() + offload_param_update_bytes_per_elem(p));
    double copy = bytes / host_link_Bps();
    // Pageable buffers: the staging memcpy (read + write) beside the DMA.
    const double host_Bps = host_staging_Bps(cluster, options.efficiency);
    if (!p.offload_pin_memory && host_Bps > 0) copy = std::max(copy, 2.0 * bytes / host_Bps);
    return copy + cpu_adam_seconds(params, cluster.gpus_per_node());
  }
  topo::KernelOp step;
  step.kind = topo::KernelKind::OPTIMIZER;
  step.bytes = params * models::optimizer_step_bytes_per_param(p);
  return kernels->seconds(step, topo::KernelPass::FORWARD, compute_dtype(p.precision));
}

FastEstimator::FastEstimator(const models::ModelSpec& model, const topo::Cluster& cluster,
                             const SimulateOptions& options,
                             std::shared_ptr<SharedCollectiveTimes> shared)
    : caches_(std::make_unique<FastCaches>(model, cluster, options, std::move(shared))) {}

FastEstimator::~FastEstimator() = default;

double FastEstimator::peak_memory_bytes(const models::TrainingPlan& plan) {
  models::MemoryReport r = models::estimate_memory(
      caches_->model, plan, caches_->schedule(plan).in_flight, caches_->memory_ops(plan));
  if (plan.dp_mode != models::DpMode::DDP) apply_dp_mode_memory(r, plan);
  return r.peak_bytes;
}

double FastEstimator::step_time_s(const models::TrainingPlan& plan) {
  return fast_step_time(*caches_, plan);
}

}  // namespace loom::strategies
