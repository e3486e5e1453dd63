#include "topologies/bounded_fit.hpp"

#include <algorithm>
#include <cmath>

#include "common/error.hpp"

namespace loom::topo {
namespace {

// The log-space step of the forward differences: far above the picosecond rounding of a
// simulated step, far below any physical change.
constexpr double DIFF_STEP = 1e-4;
// A value within this log distance of a bound sits at it.
constexpr double AT_BOUND = 1e-6;

struct Problem {
  const std::vector<FitParameter>& params;
  const ResidualFunction& residuals;
  std::vector<double> lo, hi, mean, width;
  int evaluations = 0;

  std::vector<double> data(const std::vector<double>& theta) {
    std::vector<double> x(theta.size());
    for (size_t j = 0; j < theta.size(); ++j) x[j] = std::exp(theta[j]);
    ++evaluations;
    return residuals(x);
  }
  double prior_cost(const std::vector<double>& theta) const {
    double c = 0;
    for (size_t j = 0; j < theta.size(); ++j) {
      const double z = (theta[j] - mean[j]) / width[j];
      c += z * z;
    }
    return c;
  }
  // Rows: data residuals; columns: parameters.
  std::vector<std::vector<double>> jacobian(const std::vector<double>& theta,
                                            const std::vector<double>& r) {
    std::vector<std::vector<double>> jac(r.size(), std::vector<double>(theta.size()));
    for (size_t j = 0; j < theta.size(); ++j) {
      std::vector<double> t = theta;
      const double h = t[j] + DIFF_STEP > hi[j] ? -DIFF_STEP : DIFF_STEP;
      t[j] += h;
      const std::vector<double> rj = data(t);
      for (size_t k = 0; k < r.size(); ++k) jac[k][j] = (rj[k] - r[k]) / h;
    }
    return jac;
  }
};

double sum_sq(const std::vector<double>& r) {
  double s = 0;
  for (double x : r) s += x * x;
  return s;
}

// Normal equations of the data rows: a = JᵀJ, g = -Jᵀr.
void normal_equations(const std::vector<std::vector<double>>& jac, const std::vector<double>& r,
                      std::vector<std::vector<double>>& a, std::vector<double>& g) {
  const size_t p = g.size();
  for (size_t k = 0; k < r.size(); ++k)
    for (size_t i = 0; i < p; ++i) {
      g[i] -= jac[k][i] * r[k];
      for (size_t j = 0; j < p; ++j) a[i][j] += jac[k][i] * jac[k][j];
    }
}

}  // namespace

std::string_view to_string(BoundStatus status) {
  switch (status) {
    case BoundStatus::FREE:
      return "free";
    case BoundStatus::AT_LOWER:
      return "at lower bound";
    case BoundStatus::AT_UPPER:
      return "at upper bound";
  }
  return "free";
}

// A pivot below this is taken as zero: its unknown is left 0 (a direction no data constrain).
constexpr double TINY_PIVOT = 1e-300;

std::vector<double> solve_dense(std::vector<std::vector<double>> a, std::vector<double> b) {
  const size_t n = b.size();
  for (size_t c = 0; c < n; ++c) {
    size_t p = c;
    for (size_t r = c + 1; r < n; ++r)
      if (std::abs(a[r][c]) > std::abs(a[p][c])) p = r;
    std::swap(a[c], a[p]);
    std::swap(b[c], b[p]);
    if (std::abs(a[c][c]) < TINY_PIVOT) continue;
    for (size_t r = c + 1; r < n; ++r) {
      const double m = a[r][c] / a[c][c];
      for (size_t k = c; k < n; ++k) a[r][k] -= m * a[c][k];
      b[r] -= m * b[c];
    }
  }
  std::vector<double> x(n, 0.0);
  for (size_t i = n; i-- > 0;) {
    double s = b[i];
    for (size_t k = i + 1; k < n; ++k) s -= a[i][k] * x[k];
    x[i] = std::abs(a[i][i]) < TINY_PIVOT ? 0 : s / a[i][i];
  }
  return x;
}

BoundedFit fit_bounded(const std::vector<FitParameter>& params, const ResidualFunction& residuals,
                       int max_iterations) {
  Problem pb{params, residuals, {}, {}, {}, {}};
  const size_t p = params.size();
  std::vector<double> theta(p);
  for (size_t j = 0; j < p; ++j) {
    const FitParameter& f = params[j];
    check_invariant(f.lower > 0 && f.lower <= f.prior && f.prior <= f.upper && f.prior_width > 0,
                    "a fitted parameter needs 0 < lower <= prior <= upper and a prior width");
    pb.lo.push_back(std::log(f.lower));
    pb.hi.push_back(std::log(f.upper));
    pb.mean.push_back(std::log(f.prior));
    pb.width.push_back(f.prior_width);
    theta[j] = pb.mean[j];
  }
  std::vector<double> r = pb.data(theta);
  double cost = sum_sq(r) + pb.prior_cost(theta);
  double lambda = 1e-3;
  for (int iter = 0; iter < max_iterations && p > 0; ++iter) {
    const auto jac = pb.jacobian(theta, r);
    std::vector<std::vector<double>> a(p, std::vector<double>(p, 0.0));
    std::vector<double> g(p, 0.0);
    normal_equations(jac, r, a, g);
    for (size_t j = 0; j < p; ++j) {  // the prior's rows
      a[j][j] += 1 / (pb.width[j] * pb.width[j]);
      g[j] -= (theta[j] - pb.mean[j]) / (pb.width[j] * pb.width[j]);
    }
    bool improved = false;
    double moved = 0;
    while (lambda < 1e12) {
      auto damped = a;
      for (size_t j = 0; j < p; ++j) damped[j][j] += lambda * a[j][j];
      const std::vector<double> step = solve_dense(damped, g);
      std::vector<double> next = theta;
      for (size_t j = 0; j < p; ++j) next[j] = std::clamp(theta[j] + step[j], pb.lo[j], pb.hi[j]);
      const std::vector<double> rn = pb.data(next);
      const double cn = sum_sq(rn) + pb.prior_cost(next);
      if (cn < cost) {
        moved = 0;
        for (size_t j = 0; j < p; ++j) moved = std::max(moved, std::abs(next[j] - theta[j]));
        theta = next, r = rn, cost = cn, lambda = std::max(lambda / 4, 1e-9);
        improved = true;
        break;
      }
      lambda *= 4;
    }
    if (!improved || moved < 1e-10) break;
  }
  BoundedFit out;
  out.residuals = r;
  out.chi_square = sum_sq(r);
  // Posterior curvature: the data's part scaled by the reduced chi-square when the residuals
  // are larger than their stated deviations (a model error the deviations do not hold).
  std::vector<std::vector<double>> h(p, std::vector<double>(p, 0.0));
  if (p > 0) {
    const auto jac = pb.jacobian(theta, r);
    std::vector<double> unused(p, 0.0);
    normal_equations(jac, r, h, unused);
    const double dof = static_cast<double>(r.size()) - static_cast<double>(p);
    const double scale = dof > 0 ? std::max(1.0, out.chi_square / dof) : 1.0;
    for (size_t i = 0; i < p; ++i) {
      for (size_t j = 0; j < p; ++j) h[i][j] /= scale;
      h[i][i] += 1 / (pb.width[i] * pb.width[i]);
    }
  }
  for (size_t j = 0; j < p; ++j) {
    FittedParameter f;
    f.name = params[j].name;
    f.value = std::exp(theta[j]);
    f.prior = params[j].prior;
    f.lower = params[j].lower;
    f.upper = params[j].upper;
    if (theta[j] <= pb.lo[j] + AT_BOUND && pb.lo[j] < pb.mean[j]) f.status = BoundStatus::AT_LOWER;
    if (theta[j] >= pb.hi[j] - AT_BOUND && pb.hi[j] > pb.mean[j]) f.status = BoundStatus::AT_UPPER;
    std::vector<double> unit(p, 0.0);
    unit[j] = 1;
    const double var = solve_dense(h, unit)[j];
    f.log_sigma = var > 0 ? std::sqrt(var) : 0;
    out.parameters.push_back(f);
  }
  out.evaluations = pb.evaluations;
  return out;
}

}  // namespace loom::topo
