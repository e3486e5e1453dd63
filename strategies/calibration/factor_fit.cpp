#include "strategies/calibration/factor_fit.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "common/error.hpp"
#include "models/plan_dtypes.hpp"
#include "strategies/step/host_launch.hpp"
#include "topologies/scaled_kernel_model.hpp"

namespace loom::strategies {
namespace {

// At most this many factors: a compute efficiency per dtype among the runs (rarely more than
// two) and the four others.
constexpr size_t MAX_FACTORS = 6;
// Bounds (docs/calibration.md "The factors and the fit"). A factor's lower bound where
// physics gives none: a fifth of the default, far outside any published calibration.
constexpr double FLOOR = 0.2, CEILING = 5.0;

// A factor moves no run's step time when d ln(step) / d ln(factor) stays below this for every
// run: a tenfold change of it would move a step by under 0.25%, nothing a run can measure.
constexpr double MIN_SENSITIVITY = 1e-3;

enum class FactorKind { COMPUTE, MEMORY, NVLINK, NETWORK, HOST, COLLECTIVE };

struct Factor {
  FactorKind kind = FactorKind::COMPUTE;
  topo::DType dtype = topo::DType::BF16;  // COMPUTE only
  topo::FitParameter parameter;           // name, prior, bounds
};

// The tensor-core dtype a run's matmuls compute in.
topo::DType run_dtype(const MeasuredRun& run) {
  switch (models::compute_dtype(run.plan.precision)) {
    case DType::FP8:
      return topo::DType::FP8;
    case DType::FP4:
      return topo::DType::FP4;
    case DType::FP16:
      return topo::DType::FP16;
    case DType::TF32:
    case DType::FP32:
      return topo::DType::TF32;
    default:
      return topo::DType::BF16;
  }
}

calibration::FitFactors factors_of(const std::vector<Factor>& factors,
                                   const std::vector<double>& x) {
  calibration::FitFactors f;
  for (size_t i = 0; i < factors.size(); ++i) {
    switch (factors[i].kind) {
      case FactorKind::COMPUTE:
        f.compute_efficiency[topo::dtype_index(factors[i].dtype)] = x[i];
        break;
      case FactorKind::MEMORY:
        f.memory_bound_time = x[i];
        break;
      case FactorKind::NVLINK:
        f.nvlink_efficiency = x[i];
        break;
      case FactorKind::NETWORK:
        f.network_efficiency = x[i];
        break;
      case FactorKind::HOST:
        f.host_launch_time = x[i];
        break;
      case FactorKind::COLLECTIVE:
        f.collective_time = x[i];
        break;
    }
  }
  return f;
}

// The compute factor's upper bound: the scale at which the largest GEMM of `dtype` reaches
// the dense datasheet peak on the slowest of the runs' GPUs (fraction x sustained clock).
double compute_ceiling(const std::vector<MeasuredRun>& runs, topo::DType dtype,
                       const SimulateOptions& o) {
  double ceiling = CEILING;
  for (const MeasuredRun& r : runs) {
    if (run_dtype(r) != dtype) continue;
    const topo::DatasheetKernelModel k(r.cluster_ref()->gpu, o.efficiency);
    ceiling = std::min(ceiling, 1 / (k.gemm_fraction(dtype) * k.clock_fraction()));
  }
  return std::max(ceiling, 1.0);
}

std::vector<Factor> requested_factors(const std::vector<MeasuredRun>& runs, const FitOptions& o) {
  std::vector<Factor> out;
  const double w = o.prior_width;
  if (o.compute) {
    std::set<int> seen;
    for (const MeasuredRun& r : runs) seen.insert(topo::dtype_index(run_dtype(r)));
    for (int d : seen) {
      const auto dtype = static_cast<topo::DType>(d);
      out.push_back({FactorKind::COMPUTE,
                     dtype,
                     {fmt::format("compute efficiency {}", loom::to_string(dtype)), 1, FLOOR,
                      compute_ceiling(runs, dtype, o.simulate), w}});
    }
  }
  // Memory-bound time 1 / bandwidth scale: no faster than the datasheet's HBM bandwidth.
  if (o.memory)
    out.push_back({FactorKind::MEMORY,
                   {},
                   {"memory-bound time", 1,
                    std::min(1.0, o.simulate.efficiency.memory_bandwidth_fraction), CEILING, w}});
  if (o.network) {
    const double nv = o.simulate.link_efficiency.nvlink;
    const double net = o.simulate.link_efficiency.infiniband;
    out.push_back({FactorKind::NVLINK, {}, {"nvlink efficiency", nv, std::min(FLOOR, nv), 1, w}});
    out.push_back(
        {FactorKind::NETWORK, {}, {"inter-node efficiency", net, std::min(FLOOR, net), 1, w}});
  }
  if (o.host) out.push_back({FactorKind::HOST, {}, {"host launch time", 1, FLOOR, CEILING, w}});
  if (o.collective)
    out.push_back({FactorKind::COLLECTIVE, {}, {"collective time", 1, FLOOR, CEILING, w}});
  return out;
}

// The fit's state: runs, factors, and a count of simulations.
class Fitter {
 public:
  Fitter(const std::vector<MeasuredRun>& runs, std::vector<Factor> factors, const FitOptions& o)
      : runs_(runs), factors_(std::move(factors)), options_(o) {}

  // Simulated step time of run `i` with factor values `x`, seconds.
  double step(size_t i, const std::vector<double>& x) {
    ++simulations_;
    const MeasuredRun& r = runs_[i];
    const auto cluster = r.cluster_ref();
    return simulate_step(r.model, r.plan, *cluster,
                         with_factors(options_.simulate, factors_of(factors_, x), *cluster))
        .step_time_s;
  }
  // Whitened log-ratio residuals of the runs in `use` with values `x`.
  std::vector<double> residuals(const std::vector<size_t>& use, const std::vector<double>& x) {
    std::vector<double> r;
    for (size_t i : use) r.push_back(std::log(step(i, x) / runs_[i].step_s) / options_.run_sigma);
    return r;
  }
  topo::BoundedFit fit(const std::vector<size_t>& use) {
    std::vector<topo::FitParameter> params;
    for (const Factor& f : factors_) params.push_back(f.parameter);
    return topo::fit_bounded(params,
                             [&](const std::vector<double>& x) { return residuals(use, x); });
  }
  std::vector<double> priors() const {
    std::vector<double> x;
    for (const Factor& f : factors_) x.push_back(f.parameter.prior);
    return x;
  }
  int simulations() const { return simulations_; }

 private:
  const std::vector<MeasuredRun>& runs_;
  std::vector<Factor> factors_;
  const FitOptions& options_;
  int simulations_ = 0;
};

std::vector<double> values(const topo::BoundedFit& fit) {
  std::vector<double> x;
  for (const auto& p : fit.parameters) x.push_back(p.value);
  return x;
}

// Keeps the factors some run's step time depends on and, of those, at most runs - 1 (one run
// left over to judge them), the most influential first; notes and warns about the rest.
std::vector<Factor> constrained_factors(const std::vector<MeasuredRun>& runs,
                                        std::vector<Factor> factors, const FitOptions& o,
                                        FitResult& out, std::vector<double>& model_s) {
  std::vector<size_t> all(runs.size());
  std::iota(all.begin(), all.end(), size_t{0});
  Fitter probe(runs, factors, o);
  const std::vector<double> x0 = probe.priors();
  const std::vector<double> r0 = probe.residuals(all, x0);
  for (size_t i = 0; i < runs.size(); ++i)
    model_s[i] = runs[i].step_s * std::exp(r0[i] * o.run_sigma);
  std::vector<std::pair<double, size_t>> influence;  // (column norm, factor index)
  for (size_t j = 0; j < factors.size(); ++j) {
    std::vector<double> x = x0;
    x[j] *= std::exp(x[j] * 1.0001 > factors[j].parameter.upper ? -1e-4 : 1e-4);
    const std::vector<double> rj = probe.residuals(all, x);
    double norm = 0, most = 0;
    for (size_t k = 0; k < runs.size(); ++k) {
      const double d = (rj[k] - r0[k]) * o.run_sigma / 1e-4;
      norm += d * d, most = std::max(most, std::abs(d));
    }
    if (most > MIN_SENSITIVITY)
      influence.emplace_back(std::sqrt(norm), j);
    else
      out.notes.push_back(fmt::format("{}: no run's step time depends on it; left at its default",
                                      factors[j].parameter.name));
  }
  out.simulations += probe.simulations();
  const size_t most = std::min(MAX_FACTORS, runs.size() > 0 ? runs.size() - 1 : 0);
  std::stable_sort(influence.begin(), influence.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> dropped;
  for (size_t i = most; i < influence.size(); ++i)
    dropped.push_back(factors[influence[i].second].parameter.name);
  if (!dropped.empty()) {
    out.warnings.push_back(fmt::format(
        "{} run{} can fit at most {} factor{} (runs must exceed factors by one to judge them); "
        "left at the default: {}; add runs to fit them",
        runs.size(), runs.size() == 1 ? "" : "s", most, most == 1 ? "" : "s",
        fmt::join(dropped, ", ")));
    influence.resize(most);
  }
  std::sort(influence.begin(), influence.end(),
            [](const auto& a, const auto& b) { return a.second < b.second; });
  std::vector<Factor> kept;
  for (const auto& [norm, j] : influence) kept.push_back(factors[j]);
  return kept;
}

double mape(const std::vector<RunFit>& runs, double RunFit::*field) {
  double s = 0;
  for (const RunFit& r : runs) s += std::abs(r.*field / r.measured_s - 1);
  return runs.empty() ? 0 : 100 * s / static_cast<double>(runs.size());
}

// Leave-one-out: each run predicted by the factors fitted to the others.
void leave_one_out(Fitter& fitter, size_t n, FitResult& out) {
  for (size_t i = 0; i < n; ++i) {
    std::vector<size_t> rest;
    for (size_t k = 0; k < n; ++k)
      if (k != i) rest.push_back(k);
    const topo::BoundedFit f = fitter.fit(rest);
    out.runs[i].loo_s = fitter.step(i, values(f));
    for (size_t j = 0; j < out.fitted.size(); ++j) {
      FactorFit& ff = out.fitted[j];
      const double v = f.parameters[j].value;
      ff.loo_min = i == 0 ? v : std::min(ff.loo_min, v);
      ff.loo_max = i == 0 ? v : std::max(ff.loo_max, v);
    }
  }
}

void add_warnings(FitResult& out) {
  for (const FactorFit& f : out.fitted) {
    const auto& p = f.parameter;
    if (p.status == topo::BoundStatus::FREE) continue;
    out.warnings.push_back(fmt::format(
        "{} sits at its {} bound ({:.4g}): the runs ask for more than its physical range; "
        "something else in the model misses them (plan, model, cluster); do not trust it",
        p.name, p.status == topo::BoundStatus::AT_LOWER ? "lower" : "upper", p.value));
  }
  if (out.factors.loo_mape_pct && *out.factors.loo_mape_pct > out.model_mape_pct)
    out.warnings.push_back(fmt::format(
        "leave-one-out error {:.2f}% is worse than the uncalibrated model's {:.2f}%: the factors "
        "do not generalise beyond these runs; do not use them for other runs",
        *out.factors.loo_mape_pct, out.model_mape_pct));
}

}  // namespace

SimulateOptions with_factors(SimulateOptions base, const calibration::FitFactors& factors,
                             const topo::Cluster& cluster) {
  std::shared_ptr<const topo::KernelTimeModel> inner =
      base.kernels ? base.kernels
                   : std::make_shared<topo::DatasheetKernelModel>(cluster.gpu, base.efficiency);
  base.kernels = std::make_shared<topo::ScaledKernelModel>(std::move(inner),
                                                           calibration::kernel_scales(factors));
  base.collective_time_scale *= factors.collective_time.value_or(1.0);
  if (factors.nvlink_efficiency) base.link_efficiency.nvlink = *factors.nvlink_efficiency;
  if (const auto& e = factors.network_efficiency) {
    base.link_efficiency.infiniband = *e;
    base.link_efficiency.roce = *e;
    base.link_efficiency.ethernet = *e;
  }
  if (factors.host_launch_time)
    base.host_launch_s =
        *factors.host_launch_time * host_launch_for(base.host_launch_s, cluster.gpu.host_op_s);
  return base;
}

FitResult fit_factors(const std::vector<MeasuredRun>& runs, const FitOptions& options) {
  FitResult out;
  std::vector<double> model_s(runs.size());
  const std::vector<Factor> factors =
      constrained_factors(runs, requested_factors(runs, options), options, out, model_s);
  std::vector<size_t> all(runs.size());
  std::iota(all.begin(), all.end(), size_t{0});
  Fitter fitter(runs, factors, options);
  const topo::BoundedFit fit = fitter.fit(all);
  const std::vector<double> x = values(fit);
  out.factors = factors_of(factors, x);
  for (const auto& p : fit.parameters) out.fitted.push_back({p});
  for (size_t i = 0; i < runs.size(); ++i)
    out.runs.push_back({runs[i].id, runs[i].step_s, model_s[i], fitter.step(i, x), 0});
  out.model_mape_pct = mape(out.runs, &RunFit::model_s);
  out.factors.run_count = static_cast<int>(runs.size());
  out.factors.mape_pct = mape(out.runs, &RunFit::fitted_s);
  if (options.leave_one_out && runs.size() >= 2) {
    leave_one_out(fitter, runs.size(), out);
    out.factors.loo_mape_pct = mape(out.runs, &RunFit::loo_s);
  }
  add_warnings(out);
  out.simulations += fitter.simulations();
  return out;
}

}  // namespace loom::strategies
