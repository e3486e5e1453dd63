// TP communication overlap (--tp-comm-overlap) by hand: each implementation's pipeline of
// chunked GEMMs and collectives (strategies/step/tp_overlap.hpp), its bound, and the step
// simulator and the fast tier charging the same exposed seconds.
#include <doctest/doctest.h>

#include <algorithm>

#include "models/model_loader.hpp"
#include "strategies/search/fast_estimate.hpp"
#include "strategies/step/pass_cost.hpp"
#include "strategies/step/tp_overlap.hpp"
#include "strategies/step_simulator.hpp"
#include "topologies/cluster_presets.hpp"

using namespace loom;
using namespace loom::strategies;

namespace {

topo::Cluster h100(int nodes) {
  return topo::load_cluster(topo::ClusterRequest{"dgx-h100", nodes, std::nullopt});
}

models::TrainingPlan tp8(models::Framework framework) {
  models::TrainingPlan p;
  p.tp = 8;
  p.sp = true;
  p.seq = 4096;
  p.mbs = 1;
  p.gbs = 4;
  p.framework = framework;
  return p;
}

}  // namespace

TEST_CASE("strategies::tp_overlap: the ring's closed form, by hand") {
  // n = 4 chunks of a 100 us GEMM, each chunk 30 us at its smaller shape (> 100 / 4).
  TpOverlap ring{TpOverlapMethod::RING, 4, 100e-6, 30e-6, 0, 1};
  // Communication-bound: C = 150 us over n - 1 = 3 ring steps of c = 50 us > g.
  // T = g + (n - 1) max(c, g) = 30 + 3 x 50 = 180 us; exposed = T - G = 80 us.
  CHECK(tp_overlap_exposed_s(ring, 150e-6, 132) == doctest::Approx(80e-6));
  // GEMM-bound: C = 30 us, c = 10 us < g: T = 4 x 30 = 120 us, exposed 20 us: all of the
  // collective hides, and the chunked GEMMs cost 20 us more than the whole one.
  CHECK(tp_overlap_exposed_s(ring, 30e-6, 132) == doctest::Approx(20e-6));
  // Transformer Engine's chunks on 3 streams: once the exchanges run ahead, 3 chunk GEMMs at
  // once run at the whole GEMM's rate, e = max(G / n, g / 3) = 25 us: T = 30 + 3 x 25 = 105.
  TpOverlap te = ring;
  te.streams = 3;
  CHECK(tp_overlap_exposed_s(te, 30e-6, 132) == doctest::Approx(5e-6));
  // Not overlapped: the whole collective.
  CHECK(tp_overlap_exposed_s(TpOverlap{}, 150e-6, 132) == doctest::Approx(150e-6));
}

TEST_CASE("strategies::tp_overlap: pipeline and bulk overlaps, by hand") {
  // TE "pipeline": 4 splits of a 100 us GEMM at 28 us each, on 132 - 16 SMs: g = 28 x 132 /
  // 116; each chunk's reduce-scatter c = 160 / 4 = 40 us after it, the last one exposed.
  TpOverlap pipe{TpOverlapMethod::PIPELINE, 4, 100e-6, 28e-6, 16, 1};
  const double g = 28e-6 * 132.0 / 116.0;
  const double want = g + 3 * std::max(40e-6, g) + 40e-6 - 100e-6;
  CHECK(tp_overlap_exposed_s(pipe, 160e-6, 132) == doctest::Approx(want));
  // TE "bulk": the collective beside an independent 200 us GEMM on 116 of 132 SMs.
  TpOverlap bulk{TpOverlapMethod::BULK, 1, 200e-6, 200e-6, 16, 1};
  CHECK(tp_overlap_exposed_s(bulk, 100e-6, 132) == doctest::Approx(200e-6 * 16 / 116));
  CHECK(tp_overlap_exposed_s(bulk, 300e-6, 132) == doctest::Approx(100e-6));
}

TEST_CASE("strategies::tp_overlap: never hides more than the pipelined-chunk bound") {
  // RING with n chunks: hidden = C - exposed <= (n - 1) min(c, e) for every c and g, with
  // e = max(G / n, g / streams) >= G / n (tp_overlap.hpp). Swept over communication- and
  // GEMM-bound cases, one stream (async TP) and three (TE).
  for (int n : {2, 4, 8}) {
    for (double gemm : {20e-6, 100e-6, 400e-6}) {
      for (double comm : {10e-6, 100e-6, 1000e-6}) {
        for (double loss : {1.0, 1.3, 2.5}) {
          for (int streams : {1, 3}) {
            const double g = gemm / n * loss;
            TpOverlap o{TpOverlapMethod::RING, n, gemm, g, 0, streams};
            const double c = comm / (n - 1), e = std::max(gemm / n, g / streams);
            const double hidden = comm - tp_overlap_exposed_s(o, comm, 132);
            CHECK(hidden <= (n - 1) * std::min(c, e) * (1 + 1e-12));
          }
        }
      }
    }
  }
}

TEST_CASE("strategies::tp_overlap: each implementation pairs its collectives with GEMMs") {
  const auto model = models::model_preset("llama3-8b");
  const auto cluster = h100(1);
  const topo::DatasheetKernelModel kernels(cluster.gpu);
  for (auto fw : {models::Framework::MEGATRON, models::Framework::TORCHTITAN}) {
    CAPTURE(static_cast<int>(fw));
    models::TrainingPlan p = tp8(fw);
    p.tp_comm_overlap = true;
    const PassCost c = cost_ops(models::layer_ops(model, p, 0), p, kernels, OpList::LAYER, 0);
    REQUIRE(c.fwd_comm.size() == 4);  // AG, RS, AG, RS of a dense layer
    const bool titan = fw == models::Framework::TORCHTITAN;
    for (size_t k = 0; k < 4; ++k) {
      const TpOverlap& f = c.fwd_comm[k].tp_overlap;
      const TpOverlap& b = c.bwd_comm[k].tp_overlap;
      CHECK(f.gemm_s > 0);
      CHECK(f.chunk_gemm_s >= f.gemm_s / f.chunks * (1 - 1e-12));  // smaller shapes: slower
      if (c.fwd_comm[k].op == sim::CollectiveOp::ALL_GATHER) {
        CHECK(f.method == TpOverlapMethod::RING);  // qkv_fprop / fc1_fprop ring_exchange
        CHECK(f.chunks == 8);
        CHECK(b.method == (titan ? TpOverlapMethod::RING : TpOverlapMethod::BULK));
      } else {
        // proj_fprop / fc2_fprop "pipeline" in 4 splits (TE); async TP: tp chunks.
        CHECK(f.method == (titan ? TpOverlapMethod::RING : TpOverlapMethod::PIPELINE));
        CHECK(f.chunks == (titan ? 8 : 4));
        CHECK(f.comm_sms == (titan ? 0 : 16));
        CHECK(b.method == TpOverlapMethod::RING);  // proj_dgrad / fc2_dgrad
      }
    }
    p.tp_comm_overlap = false;
    const PassCost off = cost_ops(models::layer_ops(model, p, 0), p, kernels, OpList::LAYER, 0);
    for (const CommItem& i : off.fwd_comm) CHECK(i.tp_overlap.method == TpOverlapMethod::NONE);
  }
}

TEST_CASE("strategies::tp_overlap: the step simulator and the fast tier agree") {
  const auto model = models::model_preset("llama3-8b");
  const auto cluster = h100(1);
  for (auto fw : {models::Framework::MEGATRON, models::Framework::TORCHTITAN}) {
    CAPTURE(static_cast<int>(fw));
    models::TrainingPlan plan = tp8(fw);
    SimulateOptions o;
    const auto base = simulate_step(model, plan, cluster, o);
    plan.tp_comm_overlap = true;
    const auto over = simulate_step(model, plan, cluster, o);
    const auto tp = static_cast<size_t>(models::index(models::Dim::TP));
    CHECK(over.step_time_s < base.step_time_s);
    CHECK(over.comm_time_s[tp] == doctest::Approx(base.comm_time_s[tp]).epsilon(0.01));
    // More stays exposed than the old 1 / tp credit left: chunked GEMMs, comm-bound
    // out-projections, the pipeline's tail.
    CHECK(over.exposed_comm_s[tp] > over.comm_time_s[tp] / 8);
    CHECK(over.exposed_comm_s[tp] < over.comm_time_s[tp]);
    FastEstimator fast(model, cluster, o);
    CHECK(fast.step_time_s(plan) == doctest::Approx(over.step_time_s).epsilon(0.02));
  }
}
