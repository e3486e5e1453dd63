// The network fit (sim/calibration/network_fit.hpp): parameters of loom's own collective
// model recovered from logs loom generated with altered parameters, bounds, transfer of a
// real 2-node log to the same cluster's other node count, and what a fit covers.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "sim/calibration/nccl_tests.hpp"
#include "sim/calibration/network_fit.hpp"
#include "sim/calibration/network_fit_json.hpp"
#include "sim/calibration/profile.hpp"
#include "sim/nccl_model.hpp"
#include "tests/source_path.hpp"
#include "topologies/cluster_presets.hpp"

using namespace loom;
using namespace loom::calibration;
using loom::testing::source_path;

namespace {

ClusterCache dgx_h100() {
  return ClusterCache([](int nodes) {
    topo::ClusterRequest r;
    r.spec = "dgx-h100";
    r.nodes = nodes;
    return topo::load_cluster(r);
  });
}

// Rows loom's model gives for `op` on `nodes` DGX H100 nodes (8 ranks each), sizes 8 B to
// 8 GiB by x8, with the given parameters: a synthetic nccl-tests log.
std::vector<NetworkObservation> synthetic(ClusterCache& clusters, sim::CollectiveOp op, int nodes,
                                          const sim::LinkEfficiency& e, const sim::NcclTuning& t,
                                          const std::string& log,
                                          sim::Algorithm algorithm = sim::Algorithm::AUTO) {
  std::vector<NetworkObservation> rows;
  for (double bytes = 8; bytes <= 8.0 * (1 << 30); bytes *= 8) {
    NetworkObservation o;
    o.op = op;
    o.group_size = 8 * nodes;
    o.nodes = nodes;
    o.bytes = bytes;
    o.algorithm = algorithm;
    o.log = log;
    o.seconds = model_seconds(clusters.of(nodes), o, e, t);
    rows.push_back(o);
  }
  return rows;
}

const NetworkParameter& param(const FittedNetwork& n, NetworkParam p) {
  const NetworkParameter* q = n.find(p);
  REQUIRE(q != nullptr);
  return *q;
}

std::string real_log(const char* name) {
  return source_path("tests/sim/calibration_data/real_logs/nccl-tests_all_reduce_h100_") + name +
         ".log";
}

std::vector<NetworkObservation> imported(const char* name) {
  Profile p;
  for (auto& t : import_files({real_log(name)}).tables) add_table(p, t);
  return observations_of(p);
}

double busbw_GBps(const NetworkObservation& o, double seconds) {
  return sim::bus_bandwidth_factor(o.op, o.group_size) * o.bytes / seconds / 1e9;
}

TEST_CASE("sim::NetworkFit: a 2-node log of altered parameters is recovered and transfers") {
  ClusterCache clusters = dgx_h100();
  // The "real" cluster: NICs at 0.8 x loom's 0.94 of line rate, inter-node steps 1.5 x slower.
  sim::LinkEfficiency truth_e;
  truth_e.infiniband = 0.8 * truth_e.infiniband;
  sim::NcclTuning truth_t;
  truth_t.net_latency_scale = 1.5;
  auto rows = synthetic(clusters, sim::CollectiveOp::ALL_REDUCE, 2, truth_e, truth_t, "ar.log");
  // A forced-Ring log (NCCL_ALGO=Ring) is fitted on the ring path and informs the same NICs.
  for (auto& r : synthetic(clusters, sim::CollectiveOp::ALL_GATHER, 2, truth_e, truth_t, "ag.log",
                           sim::Algorithm::RING))
    rows.push_back(r);
  const FittedNetwork net = fit_network(rows, clusters, false);
  const auto& nic = param(net, NetworkParam::NIC_EFFICIENCY);
  const auto& net_latency = param(net, NetworkParam::NET_LATENCY_SCALE);
  CHECK(nic.status == BoundStatus::FITTED);
  CHECK(nic.value == doctest::Approx(truth_e.infiniband).epsilon(0.02));
  CHECK(net_latency.value == doctest::Approx(1.5).epsilon(0.02));
  CHECK(net.rms_log_residual < 0.01);
  MESSAGE("recovered nic_efficiency " << nic.value << " (true " << truth_e.infiniband
                                      << "), net_latency_scale " << net_latency.value);
  // 4 and 8 nodes: loom with the fitted parameters matches loom with the true ones.
  double worst = 0;
  for (int nodes : {4, 8}) {
    for (double bytes : {8.0, 1048576.0, 67108864.0, 1073741824.0}) {
      NetworkObservation o;
      o.group_size = 8 * nodes;
      o.nodes = nodes;
      o.bytes = bytes;
      const double truth = model_seconds(clusters.of(nodes), o, truth_e, truth_t);
      const double fitted =
          model_seconds(clusters.of(nodes), o, net.link_efficiency(), net.nccl_tuning());
      CAPTURE(nodes);
      CAPTURE(bytes);
      CHECK(fitted / truth == doctest::Approx(1.0).epsilon(0.02));
      worst = std::max(worst, std::abs(fitted / truth - 1));
    }
  }
  MESSAGE("4- and 8-node predictions: worst |error| " << 100 * worst << "%");
}

TEST_CASE("sim::NetworkFit: a log faster than NVLink's line rate pins it at the bound") {
  ClusterCache clusters = dgx_h100();
  sim::LinkEfficiency line_rate;
  line_rate.nvlink = 1.0;
  // A ring all_gather on one node runs at its GPUs' NVLink rate; the log is 25% faster than
  // even the line rate (25 GB/s per link) allows.
  auto rows = synthetic(clusters, sim::CollectiveOp::ALL_GATHER, 1, line_rate, {}, "fast.log",
                        sim::Algorithm::RING);
  for (auto& r : rows) r.seconds *= 0.8;
  const FittedNetwork net = fit_network(rows, clusters, false);
  const auto& nvlink = param(net, NetworkParam::NVLINK_EFFICIENCY);
  CHECK(nvlink.status == BoundStatus::AT_UPPER);
  CHECK(nvlink.value == doctest::Approx(1.0));
  CHECK(to_string(nvlink.status) == "at_upper_bound");
  CHECK(nvlink.sigma == 0);
}

TEST_CASE("sim::NetworkFit: rows of one node leave the NICs at their default") {
  ClusterCache clusters = dgx_h100();
  sim::LinkEfficiency e;
  e.nvlink = 0.7;
  const auto rows = synthetic(clusters, sim::CollectiveOp::ALL_GATHER, 1, e, {}, "intra.log");
  const FittedNetwork net = fit_network(rows, clusters, false);
  CHECK(param(net, NetworkParam::NVLINK_EFFICIENCY).value == doctest::Approx(0.7).epsilon(0.02));
  CHECK(param(net, NetworkParam::NIC_EFFICIENCY).status == BoundStatus::PRIOR);
  CHECK(param(net, NetworkParam::NIC_EFFICIENCY).value == doctest::Approx(0.94));
  CHECK(coverage(net, 1).fitted);
  const Coverage inter = coverage(net, 4);
  CHECK_FALSE(inter.fitted);
  CHECK(inter.reason.find("no row of the profile is NIC-bound") != std::string::npos);
}

TEST_CASE("sim::NetworkFit: the section survives the profile's JSON round trip") {
  ClusterCache clusters = dgx_h100();
  auto rows = synthetic(clusters, sim::CollectiveOp::ALL_GATHER, 2, {}, {}, "a.log");
  for (auto& r : synthetic(clusters, sim::CollectiveOp::ALL_REDUCE, 2, {}, {}, "b.log"))
    rows.push_back(r);
  Profile p;
  p.network = fit_network(rows, clusters, true);
  REQUIRE(p.network->leave_one_out.size() == 2);
  const Profile q = parse_profile(profile_to_json(p), "p.json");
  REQUIRE(q.network.has_value());
  CHECK(q.network->parameters.size() == p.network->parameters.size());
  CHECK(q.network->rows.size() == rows.size());
  CHECK(q.network->leave_one_out[1].rows.size() == p.network->leave_one_out[1].rows.size());
  CHECK(q.network->link_efficiency().infiniband ==
        doctest::Approx(p.network->link_efficiency().infiniband));
  CHECK_THROWS_AS(parse_profile(R"({"format": "loom-calibration", "version": 1,
      "collectives": [], "network": {"parameters": [{"name": "nic_efficiency", "value": 1.5,
      "default": 0.94, "lower": 0.05, "upper": 1, "sigma": 0, "status": "fitted"}]}})",
                                "bad.json"),
                  ConfigError);
}

// Real logs (calibration_data/real_logs, imported as users paste them): the fit on one
// log predicts the busbw (sizes >= 64 MiB) of the same cluster's other node count. Returns
// the mean |error| of loom uncalibrated and calibrated, and checks `tolerance` at sizes >=
// `checked_from` bytes (the ramp below the plateau is the Simple protocol's latency, which
// simple_latency_scale fits from the rows that mix latency and bandwidth).
std::pair<double, double> transfer(const char* fit_on, const char* predict, int nodes,
                                   double tolerance, double checked_from) {
  ClusterCache clusters = dgx_h100();
  const FittedNetwork net = fit_network(imported(fit_on), clusters, false);
  double uncal_err = 0, cal_err = 0;
  int n = 0;
  for (const auto& o : imported(predict)) {
    if (o.bytes < TRANSFER_MIN_BYTES) continue;
    const double measured = busbw_GBps(o, o.seconds);
    const double uncal = busbw_GBps(o, model_seconds(clusters.of(nodes), o, {}, {}));
    const double cal = busbw_GBps(
        o, model_seconds(clusters.of(nodes), o, net.link_efficiency(), net.nccl_tuning()));
    CAPTURE(o.bytes);
    CAPTURE(uncal);
    if (o.bytes >= checked_from) CHECK(std::abs(cal / measured - 1) < tolerance);
    uncal_err += std::abs(uncal / measured - 1);
    cal_err += std::abs(cal / measured - 1);
    ++n;
  }
  REQUIRE(n > 0);
  MESSAGE(std::string(predict) << " busbw mean |error| over sizes >= 64 MiB: uncalibrated "
                               << 100 * uncal_err / n << "%, calibrated " << 100 * cal_err / n
                               << "%");
  return {uncal_err / n, cal_err / n};
}

}  // namespace

// Bare-metal 2 nodes (qoofyk, nccl-tests #309) -> the same author's 4-node cluster. The 2-node
// plateau (469 GB/s) is NVLSTree's NVLink SHARP side, which loom overestimates (537): the fit
// lowers NVLS and leaves the NICs near their default, so the 4-node plateau (NIC-bound, 366
// GB/s) stays right; the 2-node ramp (64-512 MiB) fits the Simple protocol's latency 1.6x
// NCCL's, and the 4-node ramp follows (NCCL's latency model grows it with the nodes). Every
// size >= 64 MiB within 8% (the issue's transfer target; uncalibrated: +24% at 64 MiB), mean
// 2.4% against 7.5% uncalibrated when this test was written.
TEST_CASE("sim::NetworkFit: a real 2-node fit predicts the same author's 4 nodes") {
  const auto [uncal, cal] = transfer("16gpu_2node", "32gpu_4node_vm", 4, 0.08, 64.0 * (1 << 20));
  CHECK(cal < 0.5 * uncal);
}

// One cluster (shahizat, nccl-tests #290): 2 nodes (155 GB/s: its NICs, per the thread's Ring
// rerun at 90 GB/s) -> its single node (NVLS, 476 GB/s). The 2-node slowdown could be blamed
// on NVLS or on the NICs (the model's min()); the priors (NVLS is silicon, 0.1 wide; NICs
// vary by site, 0.3) blame the NICs, so one node keeps loom's NVLS: within 8% at >= 1 GiB
// (loom uncalibrated: 7.3% at 1 GiB, 12.9% mean over >= 64 MiB, unchanged by the fit), not the
// 3x slowdown blaming NVLS would predict.
TEST_CASE("sim::NetworkFit: a real 2-node fit leaves the same cluster's one node alone") {
  const auto [uncal, cal] =
      transfer("16gpu_2node_srun-prefixed", "8gpu_1node", 1, 0.08, 1073741824.0);
  CHECK(cal <= uncal + 0.01);
}

// NCCL's Tree all-reduce latency on 2 nodes of 8 (tuning.cc): baseLat + 2((8-1) intraLat +
// log2(2) interLat) = 6.8 + 2(7 x 0.6 + 5.0) = 25.2 us for LL; the tuning scales each term.
TEST_CASE("sim::NcclTuning: latency scales multiply NCCL's base, intra and NET latencies") {
  sim::NcclShape shape;
  shape.ranks = 16;
  shape.nodes = 2;
  shape.arch = sim::nccl::HOPPER;
  const auto tree = [&] {
    return sim::nccl_latency_us(sim::Algorithm::TREE, sim::Protocol::LL,
                                sim::CollectiveOp::ALL_REDUCE, shape, 8);
  };
  CHECK(tree() == doctest::Approx(25.2));
  shape.tuning.net_latency_scale = 1.5;
  CHECK(tree() == doctest::Approx(6.8 + 2 * (7 * 0.6 + 1.5 * 5.0)));
  shape.tuning.intra_latency_scale = 2;
  CHECK(tree() == doctest::Approx(2 * 6.8 + 2 * (7 * 2 * 0.6 + 1.5 * 5.0)));
  // The Simple protocol's scale moves Simple's latencies and leaves LL's.
  const double ll = tree();
  const auto simple = [&] {
    return sim::nccl_latency_us(sim::Algorithm::TREE, sim::Protocol::SIMPLE,
                                sim::CollectiveOp::ALL_REDUCE, shape, 8);
  };
  const double simple_before = simple();
  shape.tuning.simple_latency_scale = 3;
  CHECK(tree() == doctest::Approx(ll));
  CHECK(simple() == doctest::Approx(3 * simple_before));
  shape.tuning.simple_latency_scale = 1;
  // nvlsEfficiency replaced: NVLS bandwidth factor = efficiency x 15/16.
  shape.tuning.nvls_efficiency = 0.5;
  CHECK(sim::nccl_nvls_factor(shape) == doctest::Approx(0.5 * 15 / 16));
}

TEST_CASE("sim::NetworkFit: forced algorithms and outlier weights of the imported rows") {
  Profile p;
  CollectiveTable t;
  t.op = sim::CollectiveOp::ALL_REDUCE;
  t.group_size = 16;
  t.nodes = 2;
  t.forced_algo = "Ring";
  t.source = "ring.log";
  t.points.push_back({1024, 30e-6, {}, {}, "ring.log:40", 1.0, false, false});
  t.points.push_back({2048, 90e-6, {}, {}, "ring.log:41", 0.0, true, true});
  p.collectives.push_back(t);
  const auto rows = observations_of(p);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].algorithm == sim::Algorithm::RING);
  CHECK(rows[0].log == "ring.log");
  CHECK(rows[1].weight == 0);
  // A weight-0 row is shown (role outlier) and does not move the fit.
  ClusterCache clusters = dgx_h100();
  auto synthetic_rows = synthetic(clusters, sim::CollectiveOp::ALL_REDUCE, 2, {}, {}, "ar.log");
  synthetic_rows.back().seconds *= 10;
  synthetic_rows.back().weight = 0;
  const FittedNetwork net = fit_network(synthetic_rows, clusters, false);
  CHECK(net.rows.back().role == RowRole::OUTLIER);
  CHECK(net.rms_log_residual < 1e-3);
}
