#pragma once
// Fitting a few bounded physical factors to measured runs (`loom calibrate fit`): matmul
// efficiency per compute dtype, memory-bound bandwidth, link efficiency of the NVLink and the
// inter-node tier, host time per eager launch (FitFactors of sim/calibration/profile.hpp).
// Maximum a posteriori on the log of simulated over measured step time with a log-space prior
// at the default (topologies/bounded_fit.hpp); fewer runs than factors + 1 fit fewer factors
// (the ones the runs' step times depend on most) and warn. Deterministic. Bounds, priors and
// sources: docs/calibration.md "The factors and the fit".
#include <memory>
#include <string>
#include <vector>

#include "sim/calibration/profile.hpp"
#include "strategies/calibration/run_records.hpp"
#include "strategies/step_simulator.hpp"
#include "topologies/bounded_fit.hpp"

namespace loom::strategies {

/// What to fit and how.
struct FitOptions {
  bool compute = true;  ///< matmul efficiency per compute dtype among the runs
  bool memory = true;   ///< memory-bound kernel time (1 / bandwidth scale)
  bool network = true;  ///< link efficiency of the NVLink and inter-node tiers
  bool host = true;     ///< host time per eager launch
  /// A bare time scale on every modelled collective (not a physical quantity; off by
  /// default, kept for profiles that fitted it).
  bool collective = false;
  bool leave_one_out = true;
  /// Standard deviation of ln(step time) of one measured run (iteration-to-iteration and
  /// job-to-job scatter of published step times, a few percent).
  double run_sigma = 0.02;
  /// Standard deviation of the prior in ln(factor): a factor of two costs as much as one run
  /// off by one run_sigma.
  double prior_width = 0.6931471805599453;
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

/// One fitted factor: value, prior, bounds, status, uncertainty, leave-one-out range.
struct FactorFit {
  topo::FittedParameter parameter;
  double loo_min = 0, loo_max = 0;  ///< its range over the leave-one-out fits (0: none)
};

/// The fit's outcome.
struct FitResult {
  calibration::FitFactors factors;  ///< fit.runs left empty (the caller names the file)
  std::vector<FactorFit> fitted;
  std::vector<RunFit> runs;
  double model_mape_pct = 0;          ///< the uncalibrated model's mean |error|, %
  std::vector<std::string> notes;     ///< e.g. a factor no run constrains (left at default)
  std::vector<std::string> warnings;  ///< a factor at a bound, too few runs, a worse LOO
  int simulations = 0;
};

/// `base` with `factors` applied: the kernel model (base.kernels, else the datasheet model of
/// `cluster`'s GPU with base.efficiency) wrapped in ScaledKernelModel, the collective time
/// scale, the tiers' link efficiencies and the host time per launch.
SimulateOptions with_factors(SimulateOptions base, const calibration::FitFactors& factors,
                             const topo::Cluster& cluster);

/// Fits the factors `options` asks for to `runs` (see the header comment); never throws for
/// too few runs (it warns and fits fewer, or none).
FitResult fit_factors(const std::vector<MeasuredRun>& runs, const FitOptions& options = {});

}  // namespace loom::strategies
