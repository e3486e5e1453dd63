#pragma once
// Bounded maximum-a-posteriori least squares for loom's fitted physical parameters (the
// kernel fit, topologies/kernel_fit.hpp; `loom calibrate fit`, strategies/calibration). Each
// parameter is positive, starts at its default (the prior), stays within physical bounds and
// is pulled back toward the prior by a Gaussian penalty in log space: the cost is
//   sum_i r_i^2 + sum_j ((ln x_j - ln prior_j) / width_j)^2
// where r_i are the caller's whitened residuals (each divided by its own standard deviation).
// Levenberg-Marquardt over ln x with forward-difference Jacobians; deterministic.
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace loom::topo {

/// One parameter to fit: its default and physical bounds.
struct FitParameter {
  std::string name;
  double prior = 1;  ///< the default, > 0; the fit starts here
  double lower = 1;  ///< physical lower bound, 0 < lower <= prior
  double upper = 1;  ///< physical upper bound, prior <= upper
  /// One standard deviation of the prior in ln(value): ln 2 lets a factor of two cost as
  /// much as one residual of one standard deviation.
  double prior_width = 0.6931471805599453;
};

/// Where a fitted value sits relative to its bounds.
enum class BoundStatus { FREE, AT_LOWER, AT_UPPER };
/// "free", "at lower bound", "at upper bound".
std::string_view to_string(BoundStatus status);

/// A fitted parameter: value, bound status and uncertainty.
struct FittedParameter {
  std::string name;
  double value = 1, prior = 1, lower = 1, upper = 1;
  BoundStatus status = BoundStatus::FREE;
  /// One standard deviation of ln(value) from the posterior curvature (Gauss-Newton), the
  /// data's part scaled by the reduced chi-square when the residuals exceed their stated
  /// deviations: about the relative uncertainty of value.
  double log_sigma = 0;
};

/// The fit's outcome.
struct BoundedFit {
  std::vector<FittedParameter> parameters;
  std::vector<double> residuals;  ///< whitened data residuals at the fitted values
  double chi_square = 0;          ///< sum of the squared whitened data residuals
  int evaluations = 0;            ///< calls of the residual function
};

/// Whitened residuals of the data at parameter values `x` (same order as the parameters);
/// the size must not change between calls.
using ResidualFunction = std::function<std::vector<double>(const std::vector<double>& x)>;

/// Fits `parameters` to minimise the cost above from their priors. Throws InternalError when
/// a parameter's bounds do not hold its prior. With no parameters it evaluates once.
BoundedFit fit_bounded(const std::vector<FitParameter>& parameters,
                       const ResidualFunction& residuals, int max_iterations = 80);

/// Solves the small dense system a x = b (Gaussian elimination, partial pivoting); an unknown
/// whose pivot vanishes is left 0.
std::vector<double> solve_dense(std::vector<std::vector<double>> a, std::vector<double> b);

}  // namespace loom::topo
