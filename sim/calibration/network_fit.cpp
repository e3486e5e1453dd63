// The network fit (network_fit.hpp): Levenberg-Marquardt in log-parameters on the weighted
// log-time residuals of loom's own collective model, with weak priors at the datasheet values
// (they only decide what the data cannot: a parameter no row depends on, or which of two
// tiers a min() in the model blames), box bounds by projection, several deterministic starts.
#include "sim/calibration/network_fit.hpp"

#include "topologies/bounded_fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>

#include "common/error.hpp"
#include "sim/calibration/profile.hpp"
#include "sim/engine.hpp"
#include "sim/nccl_model.hpp"

namespace loom::calibration {

namespace {

using Vec = std::vector<double>;
using Mat = std::vector<Vec>;

// Assumed scatter of a measured time, in ln: nccl-tests' out-of-place and in-place times of
// one size differ by 1-5% (the real logs in tests/sim/calibration_data/real_logs).
constexpr double MEASUREMENT_SIGMA = 0.05;
// Forward-difference step in ln(parameter).
constexpr double DIFF_STEP = 1e-3;
// Row roles by the model's latency share of its time at the prior.
constexpr double BANDWIDTH_MAX_LATENCY_SHARE = 0.05;
constexpr double LATENCY_MIN_LATENCY_SHARE = 0.8;
// A row informs the Simple protocol's latency scale when that scale moves its time by at least
// this share (d ln t / d ln scale): the ramp from latency- to bandwidth-bound sizes.
constexpr double SIMPLE_MIN_SHARE = 0.1;

// One parameter's definition: prior, bounds and prior width (ln units).
struct ParamDef {
  NetworkParam param;
  double prior, lower, upper, width;
};

// The defaults (and why):
// - nvlink 0.80: sim::LinkEfficiency (nccl-tests #149: ~20 of NVLink's 25 GB/s per link);
//   width 0.1: a property of the silicon, the same in every system of a GPU generation.
// - nic 0.94: sim::LinkEfficiency (nccl-tests #290: 46-48 of NDR's 50 GB/s); width 0.3: what
//   a NIC delivers varies with the site (VMs, RoCE, GPUDirect off, fewer rails in use: the
//   2-node logs of #290 and #309 reach 155 and 469 GB/s on the same NDR hardware).
// - nvls: NCCL's nvlsEfficiency of the architecture (tuning.cc); width 0.1 (NVSwitch
//   silicon: one-node H100 NVLS measures 476-480 GB/s in #290 and #212).
// - latency scales 1 (NCCL's constants); width 1.
// Efficiencies are bounded by 1 (the datasheet line rate) and 0.05; latency scales by
// [0.01, 100] (>= 0; the log parametrisation needs a floor, 1% of NCCL's constant).
std::vector<ParamDef> param_defs(const topo::Cluster& cluster) {
  const sim::LinkEfficiency d;
  bool ethernet = false, roce = false;
  for (const auto& l : cluster.links()) {
    ethernet = ethernet || l.kind == topo::LinkKind::ETHERNET;
    roce = roce || l.kind == topo::LinkKind::ROCE;
  }
  const double nic = roce ? d.roce : ethernet ? d.ethernet : d.infiniband;
  const double nvls = sim::nccl_arch(cluster.gpu) == sim::nccl::BLACKWELL
                          ? sim::nccl::NVLS_EFFICIENCY_BLACKWELL
                          : sim::nccl::NVLS_EFFICIENCY_HOPPER;
  return {{NetworkParam::NVLINK_EFFICIENCY, d.nvlink, 0.05, 1.0, 0.1},
          {NetworkParam::NIC_EFFICIENCY, nic, 0.05, 1.0, 0.3},
          {NetworkParam::NVLS_EFFICIENCY, nvls, 0.05, 1.0, 0.1},
          {NetworkParam::INTRA_LATENCY_SCALE, 1.0, 0.01, 100.0, 1.0},
          {NetworkParam::NET_LATENCY_SCALE, 1.0, 0.01, 100.0, 1.0},
          {NetworkParam::SIMPLE_LATENCY_SCALE, 1.0, 0.01, 100.0, 1.0}};
}

bool is_latency(NetworkParam p) {
  return p == NetworkParam::INTRA_LATENCY_SCALE || p == NetworkParam::NET_LATENCY_SCALE ||
         p == NetworkParam::SIMPLE_LATENCY_SCALE;
}

Mat invert(const Mat& a) {
  const size_t n = a.size();
  Mat inv(n, Vec(n, 0.0));
  for (size_t c = 0; c < n; ++c) {
    Vec e(n, 0.0);
    e[c] = 1.0;
    const Vec x = topo::solve_dense(a, e);
    for (size_t r = 0; r < n; ++r) inv[r][c] = x[r];
  }
  return inv;
}

// The model of a row set at ln-parameters x: ln(model time) per row.
class Model {
 public:
  Model(const std::vector<NetworkObservation>& rows, ClusterCache& clusters,
        std::vector<ParamDef> defs)
      : rows_(rows), clusters_(clusters), defs_(std::move(defs)) {}

  const std::vector<ParamDef>& defs() const { return defs_; }
  size_t size() const { return defs_.size(); }

  double log_time(size_t row, const Vec& x) const {
    sim::LinkEfficiency e;
    sim::NcclTuning t;
    for (size_t k = 0; k < defs_.size(); ++k) set_parameter(defs_[k].param, std::exp(x[k]), e, t);
    const NetworkObservation& o = rows_[row];
    return std::log(model_seconds(clusters_.of(o.nodes), o, e, t));
  }

  // Row `row`'s ln time and its gradient in x (forward differences; backward at the upper
  // bound).
  double gradient(size_t row, const Vec& x, Vec& grad) const {
    const double f = log_time(row, x);
    grad.assign(defs_.size(), 0.0);
    for (size_t k = 0; k < defs_.size(); ++k) {
      Vec y = x;
      const bool back = x[k] + DIFF_STEP > std::log(defs_[k].upper);
      y[k] += back ? -DIFF_STEP : DIFF_STEP;
      grad[k] = (log_time(row, y) - f) / (back ? -DIFF_STEP : DIFF_STEP);
    }
    return f;
  }

 private:
  const std::vector<NetworkObservation>& rows_;
  ClusterCache& clusters_;
  std::vector<ParamDef> defs_;
};

// A solution of the weighted least squares.
struct Solution {
  Vec x;            // ln-parameters
  double cost = 0;  // data (ln residual / sigma)^2 weighted, plus prior terms
  double data_rss = 0;
  int iterations = 0;
};

class Fitter {
 public:
  // Fits the parameters `free` marks to the rows `fitted` (the others held where x has them).
  Fitter(const Model& model, const std::vector<NetworkObservation>& rows,
         const std::vector<size_t>& fitted, std::vector<bool> free)
      : model_(model), rows_(rows), fitted_(fitted), free_(std::move(free)) {
    for (const auto& d : model.defs()) {
      prior_.push_back(std::log(d.prior));
      lo_.push_back(std::log(d.lower));
      hi_.push_back(std::log(d.upper));
    }
  }

  // Cost at x; fills the normal equations (J'J, -J'r) when `normal` is set.
  double evaluate(const Vec& x, Mat* jtj, Vec* jtr, double* data_rss) const {
    const size_t p = model_.size();
    if (jtj) *jtj = Mat(p, Vec(p, 0.0)), *jtr = Vec(p, 0.0);
    double cost = 0, rss = 0;
    Vec g;
    for (size_t i : fitted_) {
      const NetworkObservation& o = rows_[i];
      const double w = o.weight / (MEASUREMENT_SIGMA * MEASUREMENT_SIGMA);
      const double f = jtj ? model_.gradient(i, x, g) : model_.log_time(i, x);
      const double r = f - std::log(o.seconds);
      cost += w * r * r;
      rss += o.weight * r * r;
      if (!jtj) continue;
      for (size_t a = 0; a < p; ++a) {
        (*jtr)[a] -= w * g[a] * r;
        for (size_t b = 0; b < p; ++b) (*jtj)[a][b] += w * g[a] * g[b];
      }
    }
    for (size_t k = 0; k < p; ++k) {
      const double width = model_.defs()[k].width;
      const double r = (x[k] - prior_[k]) / width;
      cost += r * r;
      if (!jtj) continue;
      (*jtr)[k] -= r / width;
      (*jtj)[k][k] += 1.0 / (width * width);
    }
    if (data_rss) *data_rss = rss;
    return cost;
  }

  // Projected Levenberg-Marquardt from x0: a parameter at a bound that the gradient pushes
  // outward is held there for the step.
  Solution run(Vec x) const {
    const size_t p = model_.size();
    Solution s;
    double lambda = 1e-3;
    Mat jtj;
    Vec jtr;
    double cost = evaluate(x, &jtj, &jtr, &s.data_rss);
    for (s.iterations = 0; s.iterations < 40; ++s.iterations) {
      std::vector<bool> held(p, false);
      for (size_t k = 0; k < p; ++k)
        held[k] = !free_[k] || (x[k] <= lo_[k] + 1e-12 && jtr[k] < 0) ||
                  (x[k] >= hi_[k] - 1e-12 && jtr[k] > 0);
      bool improved = false;
      for (int tries = 0; tries < 12 && !improved; ++tries) {
        Mat a = jtj;
        Vec b = jtr;
        for (size_t k = 0; k < p; ++k) {
          a[k][k] *= 1.0 + lambda;
          if (held[k]) {
            for (size_t j = 0; j < p; ++j) a[k][j] = a[j][k] = 0.0;
            a[k][k] = 1.0, b[k] = 0.0;
          }
        }
        const Vec step = topo::solve_dense(a, b);
        Vec y = x;
        for (size_t k = 0; k < p; ++k) y[k] = std::clamp(x[k] + step[k], lo_[k], hi_[k]);
        const double c = evaluate(y, nullptr, nullptr, nullptr);
        if (c < cost) {
          const double change = cost - c;
          x = y;
          cost = evaluate(x, &jtj, &jtr, &s.data_rss);
          lambda = std::max(lambda / 3, 1e-9);
          improved = true;
          if (change < 1e-10 * (1 + cost)) lambda = -1;  // converged
        } else {
          lambda *= 4;
        }
      }
      if (!improved || lambda < 0) break;
    }
    s.x = x;
    s.cost = cost;
    return s;
  }

  const Vec& prior() const { return prior_; }
  const Vec& lower() const { return lo_; }
  const Vec& upper() const { return hi_; }
  bool is_free(size_t k) const { return free_[k]; }
  size_t rows() const { return fitted_.size(); }

 private:
  const Model& model_;
  const std::vector<NetworkObservation>& rows_;
  const std::vector<size_t>& fitted_;
  std::vector<bool> free_;
  Vec prior_, lo_, hi_;
};

// The clusters' largest node count among `rows` (the cluster whose parameters are fitted).
int max_nodes(const std::vector<NetworkObservation>& rows) {
  int n = 1;
  for (const auto& r : rows) n = std::max(n, r.nodes);
  return n;
}

// The stage's parameters (those `fitter` frees) from its solution: status, and the 1-sigma
// uncertainty from the curvature (J'WJ / s^2 + prior precision) of the parameters inside
// their bounds, s^2 the stage's rows' own residual variance in ln time.
void describe_parameters(const Model& model, const Fitter& fitter, const Solution& best,
                         const Vec& x0, std::vector<NetworkParameter>& out) {
  const size_t p = model.size();
  Mat jtj;
  Vec jtr;
  double rss = 0;
  fitter.evaluate(best.x, &jtj, &jtr, &rss);
  // jtj holds the data part scaled by 1/MEASUREMENT_SIGMA^2 plus the prior precision.
  std::vector<size_t> free;
  std::vector<BoundStatus> status(p, BoundStatus::FITTED);
  auto precision = [&](size_t k) { return 1.0 / (model.defs()[k].width * model.defs()[k].width); };
  // A parameter no row depends on, at the prior nor at the solution, keeps its default. (At
  // the solution alone is not enough: a NIC pushed past its PCIe link stops mattering.)
  Mat jtj0;
  Vec jtr0;
  fitter.evaluate(x0, &jtj0, &jtr0, nullptr);
  for (size_t k = 0; k < p; ++k) {
    const double floor = 1e-6 * double(fitter.rows()) / (MEASUREMENT_SIGMA * MEASUREMENT_SIGMA);
    const bool at_solution = jtj[k][k] - precision(k) > floor;
    const bool at_prior = jtj0[k][k] - precision(k) > floor;
    // Informative only at the prior and not moved from it: another tier took over (the
    // model's min()), so no row depends on it where the fit ended.
    const bool moved = std::abs(best.x[k] - x0[k]) > 1e-6;
    if (!fitter.is_free(k)) continue;
    if (!at_solution && !(at_prior && moved))
      status[k] = BoundStatus::PRIOR;
    else if (best.x[k] <= fitter.lower()[k] + 1e-9)
      status[k] = BoundStatus::AT_LOWER;
    else if (best.x[k] >= fitter.upper()[k] - 1e-9)
      status[k] = BoundStatus::AT_UPPER;
    else
      free.push_back(k);
  }
  const double dof = std::max(1.0, double(fitter.rows()) - double(free.size()));
  const double s2 = std::max(rss / dof, 1e-12);
  Mat a(free.size(), Vec(free.size(), 0.0));
  for (size_t i = 0; i < free.size(); ++i) {
    for (size_t j = 0; j < free.size(); ++j) {
      const size_t ki = free[i], kj = free[j];
      const double data = jtj[ki][kj] - (ki == kj ? precision(ki) : 0.0);
      a[i][j] =
          data * MEASUREMENT_SIGMA * MEASUREMENT_SIGMA / s2 + (ki == kj ? precision(ki) : 0.0);
    }
  }
  const Mat cov = invert(a);
  for (size_t k = 0; k < p; ++k) {
    if (!fitter.is_free(k)) continue;
    const ParamDef& d = model.defs()[k];
    NetworkParameter& q = out[k];
    q.status = status[k];
    q.value = status[k] == BoundStatus::PRIOR ? d.prior : std::exp(best.x[k]);
    q.sigma = 0;
    for (size_t i = 0; i < free.size(); ++i)
      if (free[i] == k) q.sigma = q.value * std::sqrt(std::max(0.0, cov[i][i]));
    if (status[k] == BoundStatus::PRIOR) q.sigma = q.value * d.width;
  }
}

// One stage: the parameters `free` marks fitted to `rows` from `x0` (and, with `starts`, from
// x0 with each free parameter alone lowered to 0.3 x: a slowdown the model's min() could
// blame on either tier is tried on each; the least cost wins, ties to the earlier start).
Solution fit_stage(const Model& model, const std::vector<NetworkObservation>& all,
                   const std::vector<size_t>& rows, const std::vector<bool>& free, const Vec& x0,
                   bool starts, std::vector<NetworkParameter>& out) {
  if (rows.empty()) return Solution{x0, 0, 0, 0};
  Fitter fitter(model, all, rows, free);
  Solution best = fitter.run(x0);
  for (size_t k = 0; starts && k < model.size(); ++k) {
    if (!free[k]) continue;
    Vec start = x0;
    start[k] = std::max(fitter.lower()[k], x0[k] + std::log(0.3));
    Solution s = fitter.run(start);
    if (s.cost < best.cost * (1 - 1e-9)) best = std::move(s);
  }
  describe_parameters(model, fitter, best, x0, out);
  best.x.resize(model.size());
  for (size_t k = 0; k < model.size(); ++k)
    if (free[k]) best.x[k] = std::log(out[k].value);
  return best;
}

FittedNetwork fit_once(const std::vector<NetworkObservation>& rows, ClusterCache& clusters) {
  const topo::Cluster& big = clusters.of(max_nodes(rows));
  Model model(rows, clusters, param_defs(big));
  const size_t p = model.size();
  Vec x0(p);
  for (size_t k = 0; k < p; ++k) x0[k] = std::log(model.defs()[k].prior);

  FittedNetwork net;
  net.cluster = big.name;
  net.gpu = big.gpu.name;
  // The signature of two nodes when the cluster has them, so that it names the NICs too.
  try {
    net.fabric = fabric_signature(clusters.of(std::max(2, max_nodes(rows))));
  } catch (const Error&) {
    net.fabric = fabric_signature(big);
  }
  // Roles from the model's own latency share at the prior: d ln t / d ln(latency scale).
  std::vector<size_t> fitted;
  Vec g;
  for (size_t i = 0; i < rows.size(); ++i) {
    NetworkRow row;
    row.observation = rows[i];
    row.uncalibrated_seconds = std::exp(model.gradient(i, x0, g));
    double latency_share = 0;
    for (size_t k = 0; k < p; ++k)
      if (is_latency(model.defs()[k].param)) latency_share += g[k];
    row.role = !(rows[i].weight > 0)                          ? RowRole::OUTLIER
               : latency_share <= BANDWIDTH_MAX_LATENCY_SHARE ? RowRole::BANDWIDTH
               : latency_share >= LATENCY_MIN_LATENCY_SHARE   ? RowRole::LATENCY
                                                              : RowRole::MIXED;
    if (row.role == RowRole::BANDWIDTH || row.role == RowRole::LATENCY) fitted.push_back(i);
    if (net.measured_gpu.empty()) net.measured_gpu = rows[i].gpu;
    net.rows.push_back(row);
  }
  if (fitted.empty()) {
    throw CalibrationError(
        "no measured row is bandwidth- or latency-bound in loom's model (every one mixes "
        "both, or is marked an outlier); measure a wider size range, e.g. nccl-tests -b 8 -e 8G");
  }
  // Stage 1: the bandwidths (NVLink, NIC, NVLS efficiencies) on the bandwidth-bound rows,
  // latencies at NCCL's values; stage 2: the latencies on the latency-bound rows, bandwidths
  // as stage 1 left them. Each row informs the parameters that dominate its time.
  std::vector<NetworkParameter> out;
  for (const ParamDef& d : model.defs())
    out.push_back(
        {d.param, d.prior, d.prior, d.lower, d.upper, d.prior * d.width, BoundStatus::PRIOR});
  std::vector<size_t> bandwidth_rows, latency_rows;
  for (size_t i : fitted)
    (net.rows[i].role == RowRole::BANDWIDTH ? bandwidth_rows : latency_rows).push_back(i);
  std::vector<bool> bandwidths(p), latencies(p), simple(p);
  for (size_t k = 0; k < p; ++k) {
    simple[k] = model.defs()[k].param == NetworkParam::SIMPLE_LATENCY_SCALE;
    latencies[k] = is_latency(model.defs()[k].param) && !simple[k];
    bandwidths[k] = !latencies[k] && !simple[k];
  }
  const Solution first = fit_stage(model, rows, bandwidth_rows, bandwidths, x0, true, out);
  const Solution second = fit_stage(model, rows, latency_rows, latencies, first.x, false, out);
  // Stage 3: the Simple protocol's latency on the rows whose time it moves by at least
  // SIMPLE_MIN_SHARE (the size ramp between latency- and bandwidth-bound), everything else as
  // stages 1 and 2 left it: the one parameter those rows inform that the others do not.
  std::vector<size_t> simple_rows;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!(rows[i].weight > 0) || net.rows[i].role == RowRole::BANDWIDTH) continue;
    model.gradient(i, second.x, g);
    for (size_t k = 0; k < p; ++k) {
      if (simple[k] && g[k] >= SIMPLE_MIN_SHARE) {
        simple_rows.push_back(i);
        break;
      }
    }
  }
  const Solution third = fit_stage(model, rows, simple_rows, simple, second.x, false, out);
  for (size_t i : simple_rows)
    if (std::find(fitted.begin(), fitted.end(), i) == fitted.end()) fitted.push_back(i);
  net.iterations = first.iterations + second.iterations + third.iterations;
  net.parameters = out;
  const sim::LinkEfficiency e = net.link_efficiency();
  const sim::NcclTuning t = net.nccl_tuning();
  double sum = 0, weight = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    net.rows[i].fitted_seconds = model_seconds(clusters.of(rows[i].nodes), rows[i], e, t);
  }
  for (size_t i : fitted) {
    const double r = std::log(net.rows[i].fitted_seconds / rows[i].seconds);
    sum += rows[i].weight * r * r;
    weight += rows[i].weight;
  }
  net.rms_log_residual = weight > 0 ? std::sqrt(sum / weight) : 0;
  return net;
}

}  // namespace

FittedNetwork fit_network(const std::vector<NetworkObservation>& rows, ClusterCache& clusters,
                          bool with_leave_one_out) {
  FittedNetwork net = fit_once(rows, clusters);
  std::vector<std::string> logs;
  for (const auto& r : rows)
    if (std::find(logs.begin(), logs.end(), r.log) == logs.end()) logs.push_back(r.log);
  if (!with_leave_one_out || logs.size() < 2) return net;
  for (const std::string& held : logs) {
    std::vector<NetworkObservation> train, test;
    for (const auto& r : rows) (r.log == held ? test : train).push_back(r);
    std::vector<std::string> on;
    for (const auto& l : logs)
      if (l != held) on.push_back(l);
    FittedNetwork other;
    try {
      other = fit_once(train, clusters);
    } catch (const CalibrationError&) {
      continue;  // the other logs have no usable row: no transfer to show
    }
    const sim::LinkEfficiency e = other.link_efficiency();
    const sim::NcclTuning t = other.nccl_tuning();
    // One table per (op, group) the held-out log measured, in its order.
    std::vector<TransferTable> tables;
    for (const auto& r : test) {
      if (r.bytes < TRANSFER_MIN_BYTES) continue;
      auto it = std::find_if(tables.begin(), tables.end(), [&](const TransferTable& x) {
        return x.op == r.op && x.group_size == r.group_size && x.nodes == r.nodes;
      });
      if (it == tables.end()) {
        tables.push_back({held, on, r.op, r.group_size, r.nodes, {}});
        it = tables.end() - 1;
      }
      const topo::Cluster& c = clusters.of(r.nodes);
      const double factor = sim::bus_bandwidth_factor(r.op, r.group_size) * r.bytes / 1e9;
      TransferRow row;
      row.bytes = r.bytes;
      row.measured_busbw_GBps = factor / r.seconds;
      row.uncalibrated_busbw_GBps = factor / model_seconds(c, r, {}, {});
      row.calibrated_busbw_GBps = factor / model_seconds(c, r, e, t);
      it->rows.push_back(row);
    }
    for (auto& table : tables) net.leave_one_out.push_back(std::move(table));
  }
  return net;
}

}  // namespace loom::calibration
