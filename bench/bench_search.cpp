// Speed and quality of `loom search` (strategies/search/), on 2 threads:
//  - GPT-3 175B on 1,024 A100 (gbs 1536, seq 2048, fp16): the whole space (every dimension
//    free), plans per second of the fast tier (target >= 20,000 on 2 cores), the wall time
//    with the exact re-simulation of the best 40 and on down the fast ranking until the winner
//    is stable (at most 320; strategies/search/search.hpp), Spearman's rho of the fast tier against
//    the step simulator on 200 sampled fitting plans, and the winner beside Narayanan et al.'s TP8
//    PP8 DP16 plan (SC21; examples/plans/gpt3-175b-1024.json) in loom's own simulation: the winner
//    must be at least as fast (exit 1 otherwise).
//  - Llama-3.1-405B on 16,384 H100 (gbs 2048, seq 8192, bf16): the same figures.
// Closes with a Markdown table of both (bench/README.md): plans/s, rho, how many the exact
// tier re-simulated, how far down the fast ranking the winner was, and whether it was stable.
// Usage: bench_search [gpt3|llama|all] [threads]. Prints "name: value (target ...)".
#include <fmt/format.h>
#include <sys/resource.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_common.hpp"
#include "common/units.hpp"
#include "models/model_loader.hpp"
#include "strategies/search/search.hpp"
#include "topologies/cluster_presets.hpp"

using namespace loom;
using namespace loom::strategies;
using loom::bench::now_s;

namespace {

// CPU seconds of this process (all threads): on a machine shared with other work the wall
// time overstates what two idle cores would take; CPU time / threads does not.
double cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec) + double(u.ru_stime.tv_sec) +
         1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

std::string describe(const models::TrainingPlan& p) {
  std::string s = fmt::format("tp{} pp{} dp{}", p.tp, p.pp, p.dp);
  if (p.cp > 1) s += fmt::format(" cp{}", p.cp);
  s += fmt::format(" mbs{} {}", p.mbs, models::to_string(p.schedule));
  if (p.vpp > 1) s += fmt::format("/{}", p.vpp);
  s += fmt::format(" zero{} recompute {}", p.zero, models::to_string(p.recompute));
  if (p.sp) s += " sp";
  if (p.overlap_grad_reduce) s += " ogr";
  if (p.overlap_param_gather) s += " opg";
  if (p.tp_comm_overlap) s += " tpo";
  return s;
}

void print_report(const char* who, const models::TrainingPlan& p, const StepReport& r) {
  fmt::print(
      "  {:<12} {:<62} step {:>9}  MFU {:5.1f}%  peak {:>10}  bubble {:>9}  exposed comm {}\n", who,
      describe(p), format_time(r.step_time_s), 100 * r.mfu, format_bytes(r.memory.peak_bytes),
      format_time(r.bubble_time_s), format_time(r.exposed_comm_time_s));
}

struct Bench {
  const char* name;
  const char* model;
  const char* preset;
  int nodes;
  std::int64_t gbs, seq;
  const char* precision;
};

// One line of the closing table.
struct Row {
  std::string name;
  double plans_per_s = 0, plans_per_cpu_s = 0;
  double rho_resimulated = 0, rho_sample = 0;
  std::int64_t first = 0, resimulated = 0, cap = 0;
  int winner_fast_rank = 0;
  bool stable = false;
  double margin = 0;
  double first_best_s = 0, winner_s = 0;  // the best of the first `first`, and the winner
};
std::vector<Row> rows;

// Runs both tiers and prints the figures; returns the winner's report.
SearchResult run(const Bench& b, int threads, const models::ModelSpec& model,
                 const topo::Cluster& cluster) {
  PlanInput in;
  in.sources() = PlanSources::command_line();
  in.set("gbs", b.gbs);
  in.set("seq", b.seq);
  in.set("precision", std::string(b.precision));
  const SearchSpace space(model, in, cluster.num_gpus());
  SearchOptions o;
  o.top = 10;
  o.sample = 200;
  o.threads = threads;
  const double t0 = now_s(), c0 = cpu_s();
  SearchTally tally = fast_tier(model, space, cluster, o);
  const double t1 = now_s(), c1 = cpu_s();
  check_tally(tally, space, cluster.gpu.hbm_bytes);
  const SearchResult r = exact_tier(model, space, cluster, tally, o);
  const double t2 = now_s(), c2 = cpu_s();
  const double fast_s = t1 - t0;
  const double valid = double(tally.enumerated - tally.invalid);
  fmt::print("{}: search space {}\n", b.name, space.describe());
  fmt::print("{}: {} candidate ids, {} plans enumerated ({} invalid, {} out of memory, {} fit)\n",
             b.name, space.shapes() * space.switch_combinations(), tally.enumerated, tally.invalid,
             tally.out_of_memory, tally.fitting);
  for (const auto& [field, c] : tally.invalid_by_field)
    fmt::print("{}:   invalid by {}: {}\n", b.name, field, c.count);
  fmt::print(
      "{}: fast tier {:.2f} s wall, {:.2f} s CPU on {} threads: {:.0f} valid plans/s estimated "
      "(memory + step time; target >= 20000 on 2 cores), {:.0f} per CPU-second x {} = {:.0f} "
      "on {} idle cores; {:.0f} plans/s enumerated\n",
      b.name, fast_s, c1 - c0, threads, valid / fast_s, valid / (c1 - c0), threads,
      valid / (c1 - c0) * threads, threads, double(tally.enumerated) / fast_s);
  fmt::print(
      "{}: exact tier {:.2f} s wall, {:.2f} s CPU ({} best + {} sampled plans simulated); total "
      "{:.2f} s wall, {:.2f} s CPU\n",
      b.name, t2 - t1, c2 - c1, r.ranked.size(), r.sample_times.size(), t2 - t0, c2 - c0);
  fmt::print(
      "{}: Spearman rho fast vs simulated: {:.3f} on {} sampled fitting plans; {:.3f} on "
      "the {} re-simulated best\n",
      b.name, r.rho_sample, r.sample_times.size(), r.rho_resimulated, r.ranked.size());
  fmt::print("{}: the simulated winner was #{} of the fast tier\n", b.name,
             r.ranked.front().fast_rank);
  Row row{b.name,
          valid / fast_s,
          valid / (c1 - c0),
          r.rho_resimulated,
          r.rho_sample,
          o.exact_count(),
          r.resimulated,
          o.keep_count(),
          r.ranked.front().fast_rank,
          r.winner_stable,
          r.stable_margin,
          0,
          r.ranked.front().report.step_time_s};
  for (const auto& c : r.ranked)  // what the exact tier answered before it went further
    if (c.fast_rank <= o.exact_count()) {
      row.first_best_s = c.report.step_time_s;
      break;
    }
  fmt::print(
      "{}: exact tier re-simulated the fast tier's best {} (first {}, cap {}); winner {} (largest "
      "fast/simulated ratio {:.3f}); the best of the first {}: {}, the winner: {}\n",
      b.name, r.resimulated, row.first, row.cap, r.winner_stable ? "stable" : "NOT stable (cap)",
      1 + r.stable_margin, row.first, format_time(row.first_best_s), format_time(row.winner_s));
  rows.push_back(row);
  if (r.failed > 0)
    fmt::print("{}: {} plans the simulator could not run: {}\n", b.name, r.failed, r.first_failure);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string which = argc > 1 ? argv[1] : "all";
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  int status = 0;
  if (which == "all" || which == "gpt3") {
    const Bench b{"gpt3-175b_1024xA100", "gpt3-175b", "dgx-a100", 128, 1536, 2048, "fp16"};
    const auto model = models::load_model(b.model);
    const auto cluster = topo::load_cluster(topo::ClusterRequest{b.preset, b.nodes, std::nullopt});
    const SearchResult r = run(b, threads, model, cluster);
    const models::TrainingPlan narayanan = bench::narayanan_gpt3_plan();
    const StepReport ref = simulate_step(model, narayanan, cluster);
    fmt::print("{}: the winner beside Narayanan et al.'s plan, both simulated by loom:\n", b.name);
    print_report("search", r.ranked.front().plan, r.ranked.front().report);
    print_report("Narayanan", narayanan, ref);
    const bool ok = r.ranked.front().report.step_time_s <= ref.step_time_s;
    fmt::print("{}: winner {:.2f}x the reference's throughput ({})\n", b.name,
               ref.step_time_s / r.ranked.front().report.step_time_s,
               ok ? "at least as fast: OK" : "SLOWER: the search is wrong");
    if (!ok) status = 1;
  }
  if (which == "all" || which == "llama") {
    const Bench b{"llama3.1-405b_16384xH100", "llama3-405b", "dgx-h100", 2048, 2048, 8192, "bf16"};
    const auto model = models::load_model(b.model);
    const auto cluster = topo::load_cluster(topo::ClusterRequest{b.preset, b.nodes, std::nullopt});
    const SearchResult r = run(b, threads, model, cluster);
    print_report("search", r.ranked.front().plan, r.ranked.front().report);
  }
  fmt::print(
      "\n| case | fast tier, valid plans/s (per CPU-s) | rho, re-simulated | rho, 200 sampled | "
      "re-simulated (first, cap) | winner's fast rank | stable | best of the first / winner |\n"
      "|---|---|---|---|---|---|---|---|\n");
  for (const Row& w : rows)
    fmt::print("| {} | {:.0f} ({:.0f}) | {:.3f} | {:.3f} | {} ({}, {}) | #{} | {} | {} / {} |\n",
               w.name, w.plans_per_s, w.plans_per_cpu_s, w.rho_resimulated, w.rho_sample,
               w.resimulated, w.first, w.cap, w.winner_fast_rank,
               w.stable ? fmt::format("yes (ratio {:.3f})", 1 + w.margin) : "no: the cap",
               format_time(w.first_best_s), format_time(w.winner_s));
  return status;
}
