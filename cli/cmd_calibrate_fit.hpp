#pragma once
// `loom calibrate fit`: fits a few physical factors to measured runs and writes them into a
// calibration profile (docs/calibration.md "Fitting to measured runs").
#include <CLI/CLI.hpp>

#include <string>

#include "cli/commands.hpp"
#include "sim/calibration/profile.hpp"

namespace loom::cli {

/// Adds the `fit` subcommand to `calibrate`; the returned run executes it when parsed.
Command add_calibrate_fit(CLI::App& calibrate);

/// The factors as a table (factor, value) followed by the fit's summary line.
std::string render_factors(const calibration::FitFactors& factors);

}  // namespace loom::cli
