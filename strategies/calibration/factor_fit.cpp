#include "strategies/calibration/factor_fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "common/error.hpp"
#include "models/plan_dtypes.hpp"
#include "topologies/scaled_kernel_model.hpp"

namespace loom::strategies {
namespace {

constexpr int MAX_FACTORS = 4;

enum class FactorKind { COMPUTE, MEMORY, COLLECTIVE };

struct Factor {
  FactorKind kind = FactorKind::COMPUTE;
  topo::DType dtype = topo::DType::BF16;  // COMPUTE only
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
                                   const std::vector<double>& theta) {
  calibration::FitFactors f;
  for (size_t i = 0; i < factors.size(); ++i) {
    const double x = std::exp(theta[i]);
    switch (factors[i].kind) {
      case FactorKind::COMPUTE:
        f.compute_efficiency[topo::dtype_index(factors[i].dtype)] = x;
        break;
      case FactorKind::MEMORY:
        f.memory_bound_time = x;
        break;
      case FactorKind::COLLECTIVE:
        f.collective_time = x;
        break;
    }
  }
  return f;
}

// Solves the small dense system a x = b by Gaussian elimination with partial pivoting.
std::vector<double> solve(std::vector<std::vector<double>> a, std::vector<double> b) {
  const size_t n = b.size();
  for (size_t c = 0; c < n; ++c) {
    size_t p = c;
    for (size_t r = c + 1; r < n; ++r)
      if (std::abs(a[r][c]) > std::abs(a[p][c])) p = r;
    std::swap(a[c], a[p]);
    std::swap(b[c], b[p]);
    for (size_t r = c + 1; r < n; ++r) {
      const double m = a[r][c] / a[c][c];
      for (size_t k = c; k < n; ++k) a[r][k] -= m * a[c][k];
      b[r] -= m * b[c];
    }
  }
  std::vector<double> x(n);
  for (size_t i = n; i-- > 0;) {
    double s = b[i];
    for (size_t k = i + 1; k < n; ++k) s -= a[i][k] * x[k];
    x[i] = s / a[i][i];
  }
  return x;
}

// The fit's state: runs, factors, bounds, and a count of simulations.
class Fitter {
 public:
  Fitter(const std::vector<MeasuredRun>& runs, std::vector<Factor> factors, const FitOptions& o)
      : runs_(runs),
        factors_(std::move(factors)),
        options_(o),
        lo_(std::log(o.min_factor)),
        hi_(std::log(o.max_factor)) {}

  // Simulated step time of run `i` under log-factors `theta`, seconds.
  double step(size_t i, const std::vector<double>& theta) {
    ++simulations_;
    const MeasuredRun& r = runs_[i];
    return simulate_step(r.model, r.plan, *r.cluster,
                         with_factors(options_.simulate, factors_of(factors_, theta), *r.cluster))
        .step_time_s;
  }

  // Log-ratio residuals of the runs in `use` under `theta`.
  std::vector<double> residuals(const std::vector<size_t>& use, const std::vector<double>& theta) {
    std::vector<double> r;
    for (size_t i : use) r.push_back(std::log(step(i, theta) / runs_[i].step_s));
    return r;
  }

  // Levenberg-Marquardt from `theta` on the runs in `use`; returns the fitted log-factors.
  std::vector<double> fit(const std::vector<size_t>& use, std::vector<double> theta) {
    const size_t p = theta.size();
    std::vector<double> r = residuals(use, theta);
    double cost = sum_sq(r);
    double lambda = 1e-3;
    for (int iter = 0; iter < 60 && cost > 1e-20; ++iter) {
      const auto jac = jacobian(use, theta, r);
      std::vector<std::vector<double>> a(p, std::vector<double>(p, 0.0));
      std::vector<double> g(p, 0.0);
      for (size_t k = 0; k < r.size(); ++k)
        for (size_t i = 0; i < p; ++i) {
          g[i] -= jac[k][i] * r[k];
          for (size_t j = 0; j < p; ++j) a[i][j] += jac[k][i] * jac[k][j];
        }
      bool improved = false;
      double moved = 0;
      while (lambda < 1e10) {
        auto damped = a;
        for (size_t i = 0; i < p; ++i) damped[i][i] += lambda * a[i][i] + 1e-12;
        const std::vector<double> step = solve(damped, g);
        std::vector<double> next = theta;
        for (size_t i = 0; i < p; ++i) next[i] = std::clamp(theta[i] + step[i], lo_, hi_);
        const std::vector<double> rn = residuals(use, next);
        const double cn = sum_sq(rn);
        if (cn < cost) {
          moved = 0;
          for (size_t i = 0; i < p; ++i) moved = std::max(moved, std::abs(next[i] - theta[i]));
          theta = next, r = rn, cost = cn, lambda = std::max(lambda / 4, 1e-9);
          improved = true;
          break;
        }
        lambda *= 4;
      }
      if (!improved || moved < 1e-9) break;
    }
    return theta;
  }

  // Forward-difference Jacobian of the residuals (rows: runs, columns: factors).
  std::vector<std::vector<double>> jacobian(const std::vector<size_t>& use,
                                            const std::vector<double>& theta,
                                            const std::vector<double>& r) {
    constexpr double H = 1e-4;  // log-factor step: far above the picosecond rounding
    std::vector<std::vector<double>> jac(r.size(), std::vector<double>(theta.size()));
    for (size_t j = 0; j < theta.size(); ++j) {
      std::vector<double> t = theta;
      const double h = t[j] + H > hi_ ? -H : H;
      t[j] += h;
      const std::vector<double> rj = residuals(use, t);
      for (size_t k = 0; k < r.size(); ++k) jac[k][j] = (rj[k] - r[k]) / h;
    }
    return jac;
  }

  int simulations() const { return simulations_; }

 private:
  static double sum_sq(const std::vector<double>& r) {
    double s = 0;
    for (double x : r) s += x * x;
    return s;
  }

  const std::vector<MeasuredRun>& runs_;
  std::vector<Factor> factors_;
  const FitOptions& options_;
  double lo_, hi_;
  int simulations_ = 0;
};

std::vector<Factor> requested_factors(const std::vector<MeasuredRun>& runs, const FitOptions& o) {
  std::vector<Factor> out;
  if (o.compute) {
    std::set<int> seen;
    for (const MeasuredRun& r : runs)
      if (seen.insert(topo::dtype_index(run_dtype(r))).second)
        out.push_back({FactorKind::COMPUTE, run_dtype(r)});
    std::sort(out.begin(), out.end(), [](const Factor& a, const Factor& b) {
      return topo::dtype_index(a.dtype) < topo::dtype_index(b.dtype);
    });
  }
  if (o.memory) out.push_back({FactorKind::MEMORY});
  if (o.collective) out.push_back({FactorKind::COLLECTIVE});
  return out;
}

std::string factor_name(const Factor& f) {
  switch (f.kind) {
    case FactorKind::COMPUTE:
      return fmt::format("compute efficiency {}", loom::to_string(f.dtype));
    case FactorKind::MEMORY:
      return "memory-bound time";
    case FactorKind::COLLECTIVE:
      return "collective time";
  }
  return "?";
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
  return base;
}

FitResult fit_factors(const std::vector<MeasuredRun>& runs, const FitOptions& options) {
  FitResult out;
  std::vector<Factor> factors = requested_factors(runs, options);
  std::vector<size_t> all(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) all[i] = i;
  std::vector<double> model_s(runs.size());
  {
    // A factor that moves no run's step time (no collectives, say) cannot be fitted: keep 1.
    Fitter probe(runs, factors, options);
    const std::vector<double> zero(factors.size(), 0.0);
    const std::vector<double> r = probe.residuals(all, zero);
    for (size_t i = 0; i < runs.size(); ++i) model_s[i] = runs[i].step_s * std::exp(r[i]);
    const auto jac = probe.jacobian(all, zero, r);
    std::vector<Factor> kept;
    for (size_t j = 0; j < factors.size(); ++j) {
      double most = 0;
      for (const auto& row : jac) most = std::max(most, std::abs(row[j]));
      if (most > 1e-6) {
        kept.push_back(factors[j]);
      } else {
        out.notes.push_back(fmt::format("{}: no run's step time depends on it; left at 1",
                                        factor_name(factors[j])));
      }
    }
    out.simulations += probe.simulations();
    factors = kept;
  }
  if (factors.size() > static_cast<size_t>(MAX_FACTORS)) {
    throw ValidationError("runs", fmt::format("the runs need {} factors (a compute efficiency per "
                                              "dtype); at most {}: fit runs of fewer dtypes",
                                              factors.size(), MAX_FACTORS));
  }
  if (factors.empty() || runs.size() < factors.size()) {
    throw ValidationError("runs", fmt::format("{} runs cannot fit {} factors; give at least as "
                                              "many runs as factors (more to judge the fit)",
                                              runs.size(), factors.size()));
  }
  Fitter fitter(runs, factors, options);
  const std::vector<double> theta = fitter.fit(all, std::vector<double>(factors.size(), 0.0));
  out.factors = factors_of(factors, theta);
  double abs_err = 0, loo_err = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    RunFit rf;
    rf.id = runs[i].id;
    rf.measured_s = runs[i].step_s;
    rf.model_s = model_s[i];
    rf.fitted_s = fitter.step(i, theta);
    abs_err += std::abs(rf.fitted_s / rf.measured_s - 1);
    if (options.leave_one_out && runs.size() > factors.size()) {
      std::vector<size_t> rest;
      for (size_t k : all)
        if (k != i) rest.push_back(k);
      rf.loo_s = fitter.step(i, fitter.fit(rest, theta));
      loo_err += std::abs(rf.loo_s / rf.measured_s - 1);
    }
    out.runs.push_back(rf);
  }
  const double n = static_cast<double>(runs.size());
  out.factors.run_count = static_cast<int>(runs.size());
  out.factors.mape_pct = 100 * abs_err / n;
  if (options.leave_one_out && runs.size() > factors.size())
    out.factors.loo_mape_pct = 100 * loo_err / n;
  out.simulations += fitter.simulations();
  return out;
}

}  // namespace loom::strategies
