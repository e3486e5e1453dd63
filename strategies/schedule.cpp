#include "strategies/schedule.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <limits>

#include "common/error.hpp"

namespace loom::strategies {

using models::Schedule;

std::string to_string(PassKind kind) {
  switch (kind) {
    case PassKind::FORWARD:
      return "F";
    case PassKind::BACKWARD:
      return "B";
    case PassKind::BACKWARD_INPUT:
      return "Bi";
    case PassKind::BACKWARD_WEIGHT:
      return "W";
  }
  return "?";
}

namespace {

// Naive: one micro-batch at a time through the whole pipeline (no overlap at all).
void build_naive(PipelineSchedule& s) {
  for (int stage = 0; stage < s.stages; ++stage) {
    for (int mb = 0; mb < s.micro_batches; ++mb) {
      s.per_stage[stage].push_back({PassKind::FORWARD, mb, 0});
      s.per_stage[stage].push_back({PassKind::BACKWARD, mb, 0});
    }
  }
}

// GPipe: all forwards, then all backwards (Huang et al. 2019).
void build_gpipe(PipelineSchedule& s) {
  for (int stage = 0; stage < s.stages; ++stage) {
    for (int mb = 0; mb < s.micro_batches; ++mb)
      s.per_stage[stage].push_back({PassKind::FORWARD, mb, 0});
    for (int mb = 0; mb < s.micro_batches; ++mb)
      s.per_stage[stage].push_back({PassKind::BACKWARD, mb, 0});
  }
}

// 1F1B (PipeDream-Flush, Narayanan et al. 2021): p−s−1 warm-up forwards, then alternate
// one forward and one backward, then drain the backwards. At most p−s micro-batches in flight.
void build_1f1b(PipelineSchedule& s) {
  const int p = s.stages, m = s.micro_batches;
  for (int stage = 0; stage < p; ++stage) {
    auto& order = s.per_stage[stage];
    const int warmup = std::min(p - stage - 1, m);
    int next_f = 0, next_b = 0;
    for (; next_f < warmup; ++next_f) order.push_back({PassKind::FORWARD, next_f, 0});
    while (next_f < m) {
      order.push_back({PassKind::FORWARD, next_f++, 0});
      order.push_back({PassKind::BACKWARD, next_b++, 0});
    }
    while (next_b < m) order.push_back({PassKind::BACKWARD, next_b++, 0});
  }
}

// Interleaved 1F1B exactly as Megatron-LM orders it (forward_backward_pipelining_with_
// interleaving): micro-steps k = 0..m·v−1 visit chunk (k mod p·v) / p of micro-batch
// (k / p·v)·p + k mod p; backwards visit chunks in reverse. Warm-up is (p−s−1)·2 + (v−1)·p.
void build_interleaved(PipelineSchedule& s) {
  const int p = s.stages, m = s.micro_batches, v = s.chunks;
  const int total = m * v;
  auto chunk_of = [&](int k, bool forward) {
    int c = (k % (p * v)) / p;
    return forward ? c : v - 1 - c;
  };
  auto mb_of = [&](int k) { return (k / (p * v)) * p + k % p; };
  for (int stage = 0; stage < p; ++stage) {
    auto& order = s.per_stage[stage];
    const int warmup = std::min((p - stage - 1) * 2 + (v - 1) * p, total);
    for (int k = 0; k < warmup; ++k)
      order.push_back({PassKind::FORWARD, mb_of(k), chunk_of(k, true)});
    for (int i = 0; i < total - warmup; ++i) {
      const int k = warmup + i;
      order.push_back({PassKind::FORWARD, mb_of(k), chunk_of(k, true)});
      order.push_back({PassKind::BACKWARD, mb_of(i), chunk_of(i, false)});
    }
    for (int i = std::max(0, total - warmup); i < total; ++i)
      order.push_back({PassKind::BACKWARD, mb_of(i), chunk_of(i, false)});
  }
}

// ZB-H1 (Qi et al. 2023, "Zero Bubble Pipeline Parallelism", Sec. 3.1): the backward is split
// into Bi (input gradient, on the critical path) and W (weight gradient, deferrable). The order
// is produced by list-scheduling with unit-time F, Bi and W: a free stage runs a ready Bi
// first, else a forward if it holds fewer than p−s un-back-propagated micro-batches (1F1B's
// activation bound), else its oldest pending W; pending W passes are capped at p−1 so the
// weight-gradient buffers stay bounded. With equal F, Bi and W this reaches the paper's bubble
// (p−1)(T_F + T_B − T_W), a third of 1F1B's.
void build_zero_bubble(PipelineSchedule& s) {
  const int p = s.stages, m = s.micro_batches;
  constexpr std::int64_t UNSET = -1;
  std::vector<std::int64_t> clock(p, 0);
  std::vector<int> next_f(p, 0), next_b(p, 0);
  std::vector<std::deque<int>> pending_w(p);
  // f_end[stage][mb], b_end[stage][mb]: completion times in the unit-time replay.
  std::vector<std::vector<std::int64_t>> f_end(p, std::vector<std::int64_t>(m, UNSET));
  std::vector<std::vector<std::int64_t>> b_end(p, std::vector<std::int64_t>(m, UNSET));
  const std::int64_t total = std::int64_t{3} * m * p;
  for (std::int64_t done = 0; done < total; ++done) {
    // Candidates: (start, priority, stage, kind, mb); the smallest wins.
    struct Choice {
      std::int64_t start;
      int priority;
      int stage;
      PassKind kind;
      int mb;
    };
    Choice best{std::numeric_limits<std::int64_t>::max(), 9, 0, PassKind::FORWARD, 0};
    auto consider = [&](Choice c) {
      if (std::tie(c.start, c.priority, c.stage) < std::tie(best.start, best.priority, best.stage))
        best = c;
    };
    for (int st = 0; st < p; ++st) {
      if (next_b[st] < next_f[st]) {
        const int mb = next_b[st];
        std::int64_t ready = std::max(clock[st], f_end[st][mb]);
        bool ok = true;
        if (st + 1 < p) {
          if (b_end[st + 1][mb] == UNSET) ok = false;
          ready = std::max(ready, b_end[st + 1][mb]);
        }
        if (ok) consider({ready, 0, st, PassKind::BACKWARD_INPUT, mb});
      }
      if (next_f[st] < m && next_f[st] - next_b[st] < p - st &&
          static_cast<int>(pending_w[st].size()) < p) {
        const int mb = next_f[st];
        std::int64_t ready = clock[st];
        bool ok = true;
        if (st > 0) {
          if (f_end[st - 1][mb] == UNSET) ok = false;
          ready = std::max(ready, f_end[st - 1][mb]);
        }
        if (ok) consider({ready, 1, st, PassKind::FORWARD, mb});
      }
      if (!pending_w[st].empty())
        consider({clock[st], 2, st, PassKind::BACKWARD_WEIGHT, pending_w[st].front()});
    }
    check_invariant(best.priority != 9, "zero-bubble list scheduling found no runnable pass");
    const int st = best.stage;
    clock[st] = best.start + 1;
    s.per_stage[st].push_back({best.kind, best.mb, 0});
    if (best.kind == PassKind::FORWARD) {
      f_end[st][best.mb] = clock[st];
      ++next_f[st];
    } else if (best.kind == PassKind::BACKWARD_INPUT) {
      b_end[st][best.mb] = clock[st];
      ++next_b[st];
      pending_w[st].push_back(best.mb);
    } else {
      pending_w[st].pop_front();
    }
  }
}

}  // namespace

PipelineSchedule build_schedule(Schedule kind, int stages, int micro_batches, int chunks) {
  if (stages < 1) throw ValidationError::not_positive("stages", std::to_string(stages));
  if (micro_batches < 1)
    throw ValidationError::not_positive("micro_batches", std::to_string(micro_batches));
  if (chunks < 1) throw ValidationError::not_positive("chunks", std::to_string(chunks));
  if (kind == Schedule::INTERLEAVED) {
    if (chunks < 2)
      throw ValidationError("chunks", "the interleaved schedule needs 2 or more chunks per stage");
    if (micro_batches % stages != 0) {
      throw ValidationError(
          "micro_batches",
          fmt::format("the interleaved schedule needs the number of micro-batches ({}) to be a "
                      "multiple of the {} stages (Megatron-LM's rule)",
                      micro_batches, stages));
    }
  } else if (chunks != 1) {
    throw ValidationError("chunks",
                          fmt::format("{} chunks per stage need the interleaved schedule", chunks));
  }
  PipelineSchedule s;
  s.kind = kind;
  s.stages = stages;
  s.micro_batches = micro_batches;
  s.chunks = chunks;
  s.per_stage.resize(stages);
  switch (kind) {
    case Schedule::NAIVE:
      build_naive(s);
      break;
    case Schedule::GPIPE:
      build_gpipe(s);
      break;
    case Schedule::ONE_F_ONE_B:
      build_1f1b(s);
      break;
    case Schedule::INTERLEAVED:
      build_interleaved(s);
      break;
    case Schedule::ZERO_BUBBLE:
      build_zero_bubble(s);
      break;
  }
  check_deadlock_free(s);
  return s;
}

void check_deadlock_free(const PipelineSchedule& s) {
  const int p = s.stages, m = s.micro_batches, v = s.chunks;
  const int vstages = p * v;
  // done[kind][mb * vstages + vs]
  auto index = [&](int mb, int vs) { return static_cast<size_t>(mb) * vstages + vs; };
  std::vector<char> f_done(static_cast<size_t>(m) * vstages, 0);
  std::vector<char> b_done(f_done.size(), 0), w_done(f_done.size(), 0);
  bool split = false;
  for (const auto& order : s.per_stage)
    for (const Pass& pass : order) {
      if (pass.micro_batch < 0 || pass.micro_batch >= m || pass.chunk < 0 || pass.chunk >= v)
        throw InternalError("pipeline schedule holds a pass outside its micro-batches or chunks");
      if (pass.kind == PassKind::BACKWARD_INPUT || pass.kind == PassKind::BACKWARD_WEIGHT)
        split = true;
    }
  std::vector<size_t> cursor(p, 0);
  bool progress = true;
  while (progress) {
    progress = false;
    for (int stage = 0; stage < p; ++stage) {
      const auto& order = s.per_stage[stage];
      while (cursor[stage] < order.size()) {
        const Pass& pass = order[cursor[stage]];
        const int vs = s.virtual_stage(stage, pass.chunk);
        const size_t i = index(pass.micro_batch, vs);
        bool ready = true;
        std::vector<char>* target = nullptr;
        switch (pass.kind) {
          case PassKind::FORWARD:
            ready = vs == 0 || f_done[index(pass.micro_batch, vs - 1)];
            target = &f_done;
            break;
          case PassKind::BACKWARD:
          case PassKind::BACKWARD_INPUT:
            ready = f_done[i] && (vs == vstages - 1 || b_done[index(pass.micro_batch, vs + 1)]);
            target = &b_done;
            break;
          case PassKind::BACKWARD_WEIGHT:
            ready = b_done[i];
            target = &w_done;
            break;
        }
        if (!ready) break;
        if ((*target)[i])
          throw InternalError(
              fmt::format("pipeline schedule repeats {}(mb {}, chunk {}) on stage {}",
                          to_string(pass.kind), pass.micro_batch, pass.chunk, stage));
        (*target)[i] = 1;
        ++cursor[stage];
        progress = true;
      }
    }
  }
  for (int stage = 0; stage < p; ++stage) {
    if (cursor[stage] < s.per_stage[stage].size()) {
      const Pass& pass = s.per_stage[stage][cursor[stage]];
      throw InternalError(fmt::format(
          "pipeline schedule '{}' deadlocks: stage {} waits forever at {}(mb {}, chunk {})",
          models::to_string(s.kind), stage, to_string(pass.kind), pass.micro_batch, pass.chunk));
    }
  }
  const bool complete =
      std::all_of(f_done.begin(), f_done.end(), [](char c) { return c; }) &&
      std::all_of(b_done.begin(), b_done.end(), [](char c) { return c; }) &&
      (!split || std::all_of(w_done.begin(), w_done.end(), [](char c) { return c; }));
  if (!complete) throw InternalError("pipeline schedule misses some pass");
}

double peak_in_flight(const PipelineSchedule& s, int stage) {
  int live = 0, peak = 0;
  for (const Pass& pass : s.per_stage.at(stage)) {
    if (pass.kind == PassKind::FORWARD) peak = std::max(peak, ++live);
    if (pass.kind == PassKind::BACKWARD || pass.kind == PassKind::BACKWARD_INPUT) --live;
  }
  return static_cast<double>(peak) / s.chunks;
}

}  // namespace loom::strategies
