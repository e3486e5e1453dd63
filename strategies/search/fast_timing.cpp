// The fast tier's step time, composed in closed form from the pieces fast_estimate.cpp
// keeps (docs/search.md restates each formula). It follows the step simulator's lowering:
// a pass is its compute and then its blocking model-parallel collectives (TP ones beside
// the compute under tp_comm_overlap, what their pipeline leaves exposed after it); the pipeline
// runs m micro-batches at the pace of its slowest stage plus the schedule's fill and drain; each
// stage then waits for its data-parallel gradient reduction (overlapped with its last
// backward passes or not), runs the optimizer step and, under ZeRO-1/2 without the gather
// overlap, all-gathers its parameters. Communication that overlaps compute slows it by the
// SMs NCCL's kernels take (overlap_slowdown).
#include <algorithm>
#include <cmath>

#include "models/memory.hpp"
#include "strategies/search/fast_model.hpp"
#include "strategies/step/dp_lowering.hpp"
#include "strategies/step/step_graph.hpp"

namespace loom::strategies {
namespace {

using models::TrainingPlan;
using sim::CollectiveOp;

// When compute of `compute` seconds ends while a communication stream is busy for `comm`
// seconds from the same start, compute progressing at 1 / sd of its rate meanwhile (the
// engine's contention).
double contended_end(double compute, double comm, double sd) {
  if (comm <= 0 || sd <= 1) return compute;
  if (comm >= compute * sd) return compute * sd;
  return compute + comm * (1 - 1 / sd);
}

// A pass of `compute` seconds followed by its collectives (lower_passes.cpp): TP (under
// tp_comm_overlap) and EP (under overlap_moe_expert_parallel_comm) beside the compute on their
// own streams, the rest after it; TP leaves `tpx` exposed (tp_overlap_exposed_s), its SMs
// counted there rather than as the engine's contention. A context-parallel ring (`cpo`
// seconds, cp_overlapped) shares TP's stream, its exposure in `tpx` too.
double pass_s(const TrainingPlan& p, double compute, double tp, double ep, double other, double tpx,
              double cpo, double sd) {
  const bool tpo = p.tp_comm_overlap && p.tp > 1 && tp > 0;
  const bool epo = p.overlap_moe_expert_parallel_comm && p.ep > 1 && ep > 0;
  if (!tpo && !epo && cpo <= 0) return compute + tp + ep + other;
  const double beside = epo ? ep : 0;
  const double after = other + (tpo ? 0 : tp) + (epo ? 0 : ep);
  return std::max(contended_end(compute, beside, sd) + after,
                  std::max((tpo ? tp : 0) + cpo, epo ? ep : 0)) +
         tpx;
}

// One virtual stage's work for one micro-batch.
struct Chunk {
  UnitTimes sum;
  // Units as (kind, count), forward order: at most the embedding, dense and MoE layers and
  // the head.
  std::array<std::pair<UnitKind, int>, UNIT_KINDS> units{};
  int kinds = 0;
  double copy_fwd = 0, copy_bwd = 0;                  // ZeRO-3 copy-outs on the compute stream
  double gather_fwd = 0, gather_bwd = 0, reduce = 0;  // ZeRO-3 streams, seconds
  int unit_count = 0;
  int first_layer = 0, layers = 0;     // the transformer layers it holds
  double f = 0, b = 0, bi = 0, w = 0;  // pass seconds
};

struct Ctx {
  FastCaches& fc;
  const TrainingPlan& p;
  const std::array<UnitTimes, UNIT_KINDS>& units;
  /// The layer units by block and kept in bf16 (UnitTimeSet::blocks).
  const std::array<std::array<UnitTimes, 2>, models::LAYER_KINDS>& blocks;
  models::Bf16Layers kept;  ///< the plan's layers kept in bf16 (models::bf16_layers)
  const LayoutGroups& groups;
  double sd;
  bool zero3;
};

// The units of virtual stage `vs` (cost_stages' layout) and their summed times.
Chunk make_chunk(const Ctx& x, int vs, int first_layer, int layers, bool last) {
  Chunk c;
  c.first_layer = first_layer;
  c.layers = layers;
  // A unit kind's entry; the embedding and the head add their times to the sum here, the
  // layers block by block below.
  const auto add = [&](UnitKind kind, int n, bool sum) {
    if (n <= 0) return;
    c.units[static_cast<size_t>(c.kinds++)] = {kind, n};
    if (sum) c.sum.add(x.units[static_cast<size_t>(kind)], n);
    c.unit_count += n;
  };
  if (vs == 0 && x.units[static_cast<size_t>(UnitKind::EMBEDDING)].fwd > 0)
    add(UnitKind::EMBEDDING, 1, true);
  // The layers' sums block by block, the kept ranges of the first/last-layer rule apart.
  const int stop = first_layer + layers;
  int moe = 0;
  for (const int b : x.fc.blocks_present) {
    const std::vector<int>& in_block = x.fc.block_layers_before[static_cast<size_t>(b)];
    const auto count = [&](int lo, int hi) {
      return hi > lo ? in_block[static_cast<size_t>(hi)] - in_block[static_cast<size_t>(lo)] : 0;
    };
    const int n = count(first_layer, stop);
    const int kept = count(first_layer, std::min(stop, x.kept.start_end)) +
                     count(std::max(first_layer, x.kept.end_begin), stop);
    const auto& times = x.blocks[static_cast<size_t>(b)];
    if (n - kept > 0) c.sum.add(times[0], n - kept);
    if (kept > 0) c.sum.add(times[1], kept);
    if (models::is_moe_kind(static_cast<models::LayerKind>(b))) moe += n;
  }
  add(UnitKind::DENSE, layers - moe, false);
  add(UnitKind::MOE, moe, false);
  if (last) add(UnitKind::HEAD, 1, true);
  return c;
}

// ZeRO-3: the copy-outs each unit adds to its compute, its gathers (forward, and backward
// when re-gathered) and its reduce-scatter, with their copy-ins (dp_fsdp.cpp).
void add_zero3(const Ctx& x, Chunk& c, bool holds_last_layer) {
  const TrainingPlan& p = x.p;
  const double gbytes = gathered_param_bytes(p), rbytes = reduced_grad_bytes(p);
  const bool deepspeed = p.fsdp_impl == models::FsdpImpl::DEEPSPEED;
  const double copy_in = deepspeed ? 2.0 * gbytes : fsdp2_copy_in_bytes_per_elem(p);
  for (int i = 0; i < c.kinds; ++i) {
    const auto [kind, n] = c.units[static_cast<size_t>(i)];
    const UnitTimes& u = x.units[static_cast<size_t>(kind)];
    for (int set = 0; set < 2; ++set) {
      const double params = set == 0 ? u.params - u.expert_params : u.expert_params;
      if (params <= 0) continue;
      const GroupKind g = set == 0 ? GroupKind::DP : GroupKind::EDP;
      const double dp = set == 0 ? p.dp : p.expert_dp();
      const int pieces = deepspeed ? deepspeed_gathers(params, p.ds_prefetch_bucket) : 1;
      const double gather = pieces * (x.fc.collective_s(x.groups, g, CollectiveOp::ALL_GATHER,
                                                        params / pieces * gbytes) +
                                      x.fc.copy_s(p, params / pieces / dp * copy_in));
      const double reduce =
          x.fc.collective_s(x.groups, g, CollectiveOp::REDUCE_SCATTER, params * rbytes) +
          x.fc.copy_s(p, params * (gbytes + rbytes));
      // Regathered for backward: every unit under DeepSpeed; under FSDP2 with
      // reshard_after_forward every block but the last (and not the root's embedding/head).
      const bool block = kind == UnitKind::DENSE || kind == UnitKind::MOE;
      int regathered = deepspeed ? n : (p.reshard_after_forward && block ? n : 0);
      if (!deepspeed && regathered > 0 && holds_last_layer) {
        // The model's last block is the last block unit of this chunk.
        UnitKind last_block = UnitKind::HEAD;
        for (int j = 0; j < c.kinds; ++j) {
          const UnitKind k = c.units[static_cast<size_t>(j)].first;
          if (k == UnitKind::DENSE || k == UnitKind::MOE) last_block = k;
        }
        if (last_block == kind) --regathered;
      }
      c.gather_fwd += n * gather;
      c.gather_bwd += regathered * gather;
      c.reduce += n * reduce;
      if (set == 0) {
        const double copy_out = x.fc.copy_s(p, u.params * 2.0 * gbytes);
        c.copy_fwd += n * copy_out;
        c.copy_bwd += regathered * copy_out;
      }
    }
  }
}

// The pass seconds of a chunk for one micro-batch.
void time_passes(const Ctx& x, Chunk& c) {
  const TrainingPlan& p = x.p;
  const UnitTimes& u = c.sum;
  const double recompute = u.recompute > 0 ? pass_s(p, u.recompute, u.rec_tp, u.rec_ep, u.rec_other,
                                                    u.rec_tpx, u.rec_cpo, x.sd)
                                           : 0.0;
  c.f = pass_s(p, u.fwd + c.copy_fwd, u.fwd_tp, u.fwd_ep, u.fwd_other, u.fwd_tpx, u.fwd_cpo, x.sd);
  c.b = recompute + pass_s(p, u.bwd_input + c.copy_bwd + u.bwd_weight, u.bwd_tp, u.bwd_ep,
                           u.bwd_other, u.bwd_tpx, u.bwd_cpo, x.sd);
  c.bi = recompute + pass_s(p, u.bwd_input + c.copy_bwd, u.bwd_tp, u.bwd_ep, u.bwd_other, u.bwd_tpx,
                            u.bwd_cpo, x.sd);
  c.w = u.bwd_weight;
  // CPU offloading (cpu_offload.cpp): each offloaded layer's copy out overlaps the next
  // layer's forward and its copy in the next layer's backward; what a copy outlasts them by
  // is exposed.
  const int offloaded = std::clamp(p.cpu_offloading_num_layers - c.first_layer, 0, c.layers);
  if (offloaded > 0) {
    const double copy = x.fc.offload_copy_s(p);
    // A transformer layer's mean pass times: the layer units' alone (the embedding and the
    // head, also in the chunk at pp 1, are no layer a copy hides behind).
    double fwd = 0, bwd_input = 0, bwd_weight = 0;
    for (int j = 0; j < c.kinds; ++j) {
      const auto [kind, n] = c.units[static_cast<size_t>(j)];
      if (kind != UnitKind::DENSE && kind != UnitKind::MOE) continue;
      const UnitTimes& t = x.units[static_cast<size_t>(kind)];
      fwd += n * t.fwd;
      bwd_input += n * t.bwd_input;
      bwd_weight += n * t.bwd_weight;
    }
    const double layers = static_cast<double>(c.layers);
    const double f_layer = fwd / layers, b_layer = (bwd_input + bwd_weight) / layers;
    c.f += offloaded * std::max(0.0, copy - f_layer);
    c.b += offloaded * std::max(0.0, copy - b_layer);
    c.bi += offloaded * std::max(0.0, copy - bwd_input / layers);
  }
  if (x.zero3 && c.f + c.b > 0) {
    // Gathers prefetched on their own stream, reduce-scatters on the DP stream, each stream
    // running on while the compute stream moves to the next pass: a micro-batch takes as
    // long as the busiest of the three (compute slowed while they run), spread over the
    // passes in proportion.
    const double gathers = c.gather_fwd + c.gather_bwd;
    const double period =
        std::max({contended_end(c.f + c.b, std::max(gathers, c.reduce), x.sd), gathers, c.reduce});
    const double k = period / (c.f + c.b);
    c.f *= k;
    c.b *= k;
    c.bi *= k;
    c.w *= k;
  }
}

// A chunk's gradient buckets as Megatron makes them (dp_bucketed.cpp: parameters in reverse
// layer order, a bucket closed at `capacity`): `full` buckets of equal size, then the rest,
// which holds the chunk's first layers. A bucket's share is the part of the chunk's backward
// done when it is complete.
struct Buckets {
  std::int64_t full = 0;
  double full_s = 0;  // seconds of one full bucket's collective
  double rest_s = 0;  // seconds of the last, partial bucket (0: none)
  double step = 0;    // share of the chunk's parameters in one full bucket
};

Buckets make_buckets(const Ctx& x, double params, GroupKind group, CollectiveOp op,
                     double bytes_per) {
  Buckets b;
  if (params <= 0) return b;
  const double capacity = std::max(1.0, x.p.dp_bucket_bytes / reduced_grad_bytes(x.p));
  b.full = static_cast<std::int64_t>(std::floor(params / capacity * (1 + 1e-12)));
  b.step = capacity / params;
  if (b.full > 0) b.full_s = x.fc.collective_s(x.groups, group, op, capacity * bytes_per);
  const double rest = params - static_cast<double>(b.full) * capacity;
  if (rest > capacity * 1e-9) b.rest_s = x.fc.collective_s(x.groups, group, op, rest * bytes_per);
  return b;
}

// The data-parallel stream: buckets queued one after another, each once it is ready.
struct Stream {
  double t = 0;     // when the stream is free
  double end = 0;   // when the stage's compute ends
  double busy = 0;  // seconds of buckets started before `end`
  double from = 0;  // when the first of them started
  // `count` buckets of `seconds` each, ready at first, first + gap, ... (gap >= 0).
  void queue(std::int64_t count, double seconds, double first, double gap) {
    if (count <= 0 || seconds <= 0) return;
    const double start = std::max(t, first);
    // Equal buckets arriving evenly: the last ends after all of them from the first start,
    // or after its own arrival.
    t = std::max(start + static_cast<double>(count) * seconds,
                 first + static_cast<double>(count - 1) * gap + seconds);
    if (start < end) {
      from = busy > 0 ? std::min(from, start) : start;
      busy += std::min(static_cast<double>(count) * seconds, end - start);
    }
  }
};

struct StageTail {
  double finish = 0;   // end of the stage's step
  double stall = 0;    // ZeRO-1/2 overlapped gathers: the start of the pipeline delayed
  double stretch = 0;  // its last passes slowed by the gradient reduction overlapping them
  double span = 0;     // how long that overlap lasted
};

// Data-parallel work of stage `s` after its pipeline phase (DDP, ZeRO-1/2) and its optimizer.
StageTail dp_tail(const Ctx& x, const std::vector<Chunk>& chunks, const ScheduleFacts& sf, int s,
                  double end, double fill) {
  const TrainingPlan& p = x.p;
  const int P = p.pp, V = p.vpp;
  StageTail out;
  double dense = 0, expert = 0;
  for (int c = 0; c < V; ++c) {
    dense += chunks[static_cast<size_t>(c * P + s)].sum.params -
             chunks[static_cast<size_t>(c * P + s)].sum.expert_params;
    expert += chunks[static_cast<size_t>(c * P + s)].sum.expert_params;
  }
  const bool sharded = p.dp > 1 && p.zero >= 1;
  const double local = sharded ? dense / p.dp + expert / p.expert_dp() : dense + expert;
  const double optimizer = x.fc.optimizer_s(p, local);
  if (p.dp <= 1) {
    out.finish = end + optimizer;
    return out;
  }
  if (x.zero3) {
    const Chunk& last = chunks[static_cast<size_t>(s)];
    out.finish = end + last.reduce / std::max(1, last.unit_count) + optimizer;
    return out;
  }
  // Chunks by when their final weight-gradient pass ends (most passes after it first).
  std::vector<int> order(static_cast<size_t>(V));
  for (int c = 0; c < V; ++c) order[static_cast<size_t>(c)] = c;
  const auto& after = sf.after_final[static_cast<size_t>(s)];
  const auto behind = [&](int c) {
    const Chunk& k = chunks[static_cast<size_t>(c * P + s)];
    const auto& n = after[static_cast<size_t>(c)];
    const bool zb = p.schedule == models::Schedule::ZERO_BUBBLE;
    return n[0] * k.f + n[1] * (zb ? k.bi : k.b) + n[2] * k.w;
  };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return behind(a) > behind(b); });
  const CollectiveOp op = sharded ? CollectiveOp::REDUCE_SCATTER : CollectiveOp::ALL_REDUCE;
  const double rbytes = reduced_grad_bytes(p);
  // The DP stream: dense buckets of every chunk, then expert ones (stream order).
  Stream dp{0, end, 0, end};
  for (int set = 0; set < 2; ++set) {
    for (int c : order) {
      const Chunk& k = chunks[static_cast<size_t>(c * P + s)];
      const double params = set == 0 ? k.sum.params - k.sum.expert_params : k.sum.expert_params;
      const Buckets b =
          make_buckets(x, params, set == 0 ? GroupKind::DP : GroupKind::EDP, op, rbytes);
      // With the overlap a bucket is ready when the chunk's final pass has done its share.
      const double pass = p.schedule == models::Schedule::ZERO_BUBBLE ? k.w : k.b;
      const double begin = end - behind(c) - pass;
      const bool ogr = p.overlap_grad_reduce;
      dp.queue(b.full, b.full_s, ogr ? begin + b.step * pass : end, ogr ? b.step * pass : 0.0);
      dp.queue(1, b.rest_s, ogr ? begin + pass : end, 0.0);
    }
  }
  // The compute after the first overlapped bucket, slowed while the stream is busy.
  const double compute = end - dp.from;
  out.stretch = contended_end(compute, dp.busy, x.sd) - compute;
  out.span = std::min(compute, dp.busy);
  double finish = std::max(end + out.stretch, dp.t) + optimizer;
  // ZeRO-1/2: the updated parameter shards all-gathered per bucket, after the optimizer or,
  // overlapped, from the start of the step ahead of each chunk's first forward, in forward
  // order (the partial bucket first).
  if (sharded) {
    const double gbytes = gathered_param_bytes(p);
    double g = 0;
    for (int set = 0; set < 2; ++set) {
      for (int c = 0; c < V; ++c) {
        const Chunk& k = chunks[static_cast<size_t>(c * P + s)];
        const double params = set == 0 ? k.sum.params - k.sum.expert_params : k.sum.expert_params;
        const Buckets b = make_buckets(x, params, set == 0 ? GroupKind::DP : GroupKind::EDP,
                                       CollectiveOp::ALL_GATHER, gbytes);
        const auto& n = sf.before_first[static_cast<size_t>(s)][static_cast<size_t>(c)];
        const double first = fill + n[0] * k.f + n[1] * k.b + n[2] * k.w;
        // A bucket is needed when the forward reaches its first layer; the waits of evenly
        // spread equal buckets are largest at the first or the last of them.
        g += b.rest_s;
        if (b.rest_s > 0) out.stall = std::max(out.stall, g - first);
        if (b.full > 0 && p.overlap_param_gather) {
          const double fb = static_cast<double>(b.full);
          out.stall = std::max({out.stall, g + b.full_s - (first + (1 - fb * b.step) * k.f),
                                g + fb * b.full_s - (first + (1 - b.step) * k.f)});
        }
        g += static_cast<double>(b.full) * b.full_s;
      }
    }
    if (!p.overlap_param_gather) {
      finish += g;
      out.stall = 0;
    }
  }
  out.finish = finish;
  return out;
}

}  // namespace

double fast_step_time(FastCaches& fc, const TrainingPlan& p) {
  const UnitTimeSet& times = fc.unit_times(p);
  const Ctx x{fc,
              p,
              times.units,
              times.blocks,
              models::bf16_layers(fc.model, p),
              fc.layout(p),
              fc.slowdown,
              p.dp > 1 && p.zero >= 3};
  const ScheduleFacts& sf = fc.schedule(p);
  const int P = p.pp, V = p.vpp, S = P * V;
  const double m = static_cast<double>(p.micro_batches());
  const std::vector<int> layers = models::virtual_stage_layers(fc.model, p);
  std::vector<Chunk> chunks;
  chunks.reserve(static_cast<size_t>(S));
  for (int vs = 0, first = 0; vs < S; first += layers[static_cast<size_t>(vs)], ++vs) {
    Chunk c = make_chunk(x, vs, first, layers[static_cast<size_t>(vs)], vs + 1 == S);
    if (x.zero3) add_zero3(x, c, vs + 1 == S);
    time_passes(x, c);
    chunks.push_back(std::move(c));
  }
  // Per stage, one micro-batch through all its chunks.
  const bool zb = p.schedule == models::Schedule::ZERO_BUBBLE;
  std::vector<double> F(static_cast<size_t>(P)), B(static_cast<size_t>(P)),
      X(static_cast<size_t>(P));
  for (int s = 0; s < P; ++s) {
    double bi = 0, w = 0;
    for (int c = 0; c < V; ++c) {
      const Chunk& k = chunks[static_cast<size_t>(c * P + s)];
      F[static_cast<size_t>(s)] += k.f;
      B[static_cast<size_t>(s)] += zb ? k.bi + k.w : k.b;
      bi += k.bi;
      w += k.w;
    }
    // What a stage contributes to fill and drain: the whole micro-batch, or under ZB-H1
    // F + Bi - W (Qi et al. 2024, Sec. 3: W passes fill the cooldown bubbles).
    X[static_cast<size_t>(s)] = zb ? std::max(0.0, F[static_cast<size_t>(s)] + bi - w)
                                   : F[static_cast<size_t>(s)] + B[static_cast<size_t>(s)];
  }
  double t_max = 0, x_sum = 0, x_max = 0;
  for (int s = 0; s < P; ++s) {
    t_max = std::max(t_max, F[static_cast<size_t>(s)] + B[static_cast<size_t>(s)]);
    x_sum += X[static_cast<size_t>(s)];
    x_max = std::max(x_max, X[static_cast<size_t>(s)]);
  }
  // Activations forward and gradients back between consecutive stages.
  const double act_bytes = models::tokens_per_gpu(fc.model, p) * double(fc.model.hidden) *
                           models::activation_element_bytes(p) / double(p.tp);
  const double hop =
      P > 1 ? fc.collective_s(x.groups, GroupKind::P2P, CollectiveOp::SEND_RECV, act_bytes) : 0.0;
  const double pipe = m * t_max + (x_sum - x_max) / V + 2.0 * (P * V - 1) * hop;
  // Stage s ends its last backward `drain` before stage 0 (the last micro-batch's backward
  // still to pass stages s-1..0) and starts its first forward `fill` after stage 0. A stage
  // whose last passes are slowed by its gradient reduction delays every stage below it.
  std::vector<double> fill(static_cast<size_t>(P)), drain(static_cast<size_t>(P));
  for (int s = 1; s < P; ++s) {
    fill[static_cast<size_t>(s)] =
        fill[static_cast<size_t>(s) - 1] + chunks[static_cast<size_t>(s) - 1].f + hop;
    drain[static_cast<size_t>(s)] =
        drain[static_cast<size_t>(s) - 1] +
        (zb ? chunks[static_cast<size_t>(s) - 1].bi : chunks[static_cast<size_t>(s) - 1].b) + hop;
  }
  // The slowed spans of the stages (as long as the reduction overlapped compute, ending at
  // the stage's last backward) delay the drain by their union: spans one after another add
  // up (1F1B), spans at the same time (interleaved cooldowns) count once.
  double step = 0, stall = 0, covered = 0, reach = -1e300;
  for (int s = P - 1; s >= 0; --s) {
    const double end = pipe - drain[static_cast<size_t>(s)];
    const double delay = covered;
    StageTail tail = dp_tail(x, chunks, sf, s, end + delay, fill[static_cast<size_t>(s)]);
    if (tail.stretch > 0) {
      covered += std::max(0.0, end - std::max(end - tail.span, reach)) * tail.stretch / tail.span;
      reach = std::max(reach, end);
      tail.finish += std::max(covered - delay - tail.stretch, -tail.stretch);
    }
    step = std::max(step, tail.finish);
    stall = std::max(stall, tail.stall);
  }
  // ZeRO-3: the first unit's gather precedes the step's first forward (nothing to hide it).
  if (x.zero3 && !chunks.empty() && chunks.front().unit_count > 0)
    stall = std::max(stall, chunks.front().gather_fwd / chunks.front().unit_count);
  return step + stall;
}

}  // namespace loom::strategies
