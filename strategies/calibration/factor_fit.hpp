#pragma once
// Fitting a few physical factors to measured runs (`loom calibrate fit`): matmul efficiency
// per compute dtype, memory-bound kernel time and modelled collective time (FitFactors of
// sim/calibration/profile.hpp). Least squares on the log of simulated over measured step
// time, by Levenberg-Marquardt in log-factor space with forward-difference Jacobians and
// bounds; deterministic (no randomness, fixed start at the datasheet model).
#include <memory>
#include <string>
#include <vector>

#include "sim/calibration/profile.hpp"
#include "strategies/calibration/run_records.hpp"
#include "strategies/step_simulator.hpp"

namespace loom::strategies {

/// What to fit and how.
struct FitOptions {
  bool compute = true;     ///< fit matmul efficiency per compute dtype among the runs
  bool memory = true;      ///< fit the memory-bound time scale
  bool collective = true;  ///< fit the collective time scale
  bool leave_one_out = true;
  double min_factor = 0.2;  ///< bounds of every factor
  double max_factor = 5.0;
  /// Simulation settings shared by every run (a calibration profile's measured collectives
  /// may be set here; they are not scaled).
  SimulateOptions simulate;
};

/// One run's step times, seconds.
struct RunFit {
  std::string id;
  double measured_s = 0;
  double model_s = 0;   ///< before fitting (SimulateOptions as given)
  double fitted_s = 0;  ///< with the fitted factors
  double loo_s = 0;     ///< with factors fitted to the other runs (0 when not computed)
};

/// The fit's outcome.
struct FitResult {
  calibration::FitFactors factors;  ///< fit.runs left empty (the caller names the file)
  std::vector<RunFit> runs;
  std::vector<std::string> notes;  ///< e.g. a factor no run constrains (left at 1)
  int simulations = 0;
};

/// `base` with `factors` applied: the kernel model (base.kernels, else the datasheet model of
/// `cluster`'s GPU with base.efficiency) wrapped in ScaledKernelModel, and the collective
/// time scale.
SimulateOptions with_factors(SimulateOptions base, const calibration::FitFactors& factors,
                             const topo::Cluster& cluster);

/// Fits the factors `options` asks for to `runs`. Throws ValidationError when more than 4
/// factors would be fitted or there are fewer runs than factors.
FitResult fit_factors(const std::vector<MeasuredRun>& runs, const FitOptions& options = {});

}  // namespace loom::strategies
