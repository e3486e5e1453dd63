#include "cli/cmd_calibrate_fit.hpp"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "common/error.hpp"
#include "common/table.hpp"
#include "common/units.hpp"
#include "sim/calibration/profile.hpp"
#include "strategies/calibration/factor_fit.hpp"
#include "strategies/calibration/run_records.hpp"

namespace loom::cli {
namespace {

struct FitFlags {
  std::string runs;
  std::string cluster;
  std::string output;
  std::string factors = "compute,memory,collective";
  std::string network = "flow";
};

std::string signed_pct(double ratio) {
  const double pct = 100 * (ratio - 1);
  return std::abs(pct) < 0.005 ? "0.00%" : fmt::format("{:+.2f}%", pct);  // no "-0.00%"
}

strategies::FitOptions fit_options(const FitFlags& f) {
  strategies::FitOptions o;
  o.compute = o.memory = o.collective = false;
  std::istringstream list(f.factors);
  for (std::string name; std::getline(list, name, ',');) {
    if (name == "compute")
      o.compute = true;
    else if (name == "memory")
      o.memory = true;
    else if (name == "collective")
      o.collective = true;
    else
      throw ValidationError::bad_value("--factors", name,
                                       "compute, memory, collective (comma-separated)");
  }
  o.simulate.network = sim::parse_network_mode(f.network, "--network");
  return o;
}

Table factor_table(const calibration::FitFactors& x) {
  Table factors({"factor", "value"});
  factors.align_left(0);
  for (int d = 0; d < topo::DTYPE_COUNT; ++d)
    if (x.compute_efficiency[d])
      factors.add_row(
          {fmt::format("compute efficiency {}", loom::to_string(static_cast<loom::DType>(d))),
           fmt::format("{:.4f}", *x.compute_efficiency[d])});
  if (x.memory_bound_time)
    factors.add_row({"memory-bound time", fmt::format("{:.4f}", *x.memory_bound_time)});
  if (x.collective_time)
    factors.add_row({"collective time", fmt::format("{:.4f}", *x.collective_time)});
  return factors;
}

void print_fit(const strategies::FitResult& fit, const FitFlags& f) {
  std::cout << fmt::format("# loom calibrate fit: {} runs from {}, network {}\n\n", fit.runs.size(),
                           f.runs, f.network);
  const auto& x = fit.factors;
  std::cout << factor_table(x).render() << "\n";
  Table runs(
      {"run", "measured", "datasheet", "error", "fitted", "error", "leave-one-out", "error"});
  runs.align_left(0);
  for (const auto& r : fit.runs) {
    runs.add_row({r.id, format_time(r.measured_s), format_time(r.model_s),
                  signed_pct(r.model_s / r.measured_s), format_time(r.fitted_s),
                  signed_pct(r.fitted_s / r.measured_s), r.loo_s > 0 ? format_time(r.loo_s) : "-",
                  r.loo_s > 0 ? signed_pct(r.loo_s / r.measured_s) : "-"});
  }
  std::cout << runs.render();
  std::cout << fmt::format("\nfit error (MAPE of step time): {:.2f}%", x.mape_pct);
  if (x.loo_mape_pct) std::cout << fmt::format("; leave-one-out: {:.2f}%", *x.loo_mape_pct);
  std::cout << fmt::format(" ({} simulations)\n", fit.simulations);
  for (const auto& note : fit.notes) std::cout << "note: " << note << "\n";
}

int run_fit(const FitFlags& f) {
  const strategies::FitOptions options = fit_options(f);
  const auto runs = strategies::read_runs(
      f.runs, f.cluster.empty() ? std::nullopt : std::optional<std::string>(f.cluster));
  // An existing profile keeps its measured collectives, and the fit simulates with them.
  calibration::Profile profile;
  std::error_code ec;  // a path the system refuses (too long) is no profile to extend
  if (std::filesystem::is_regular_file(f.output, ec)) profile = calibration::read_profile(f.output);
  strategies::FitOptions with_measured = options;
  if (!profile.collectives.empty()) {
    with_measured.simulate.collective_override =
        std::make_shared<calibration::MeasuredCollectives>(profile);
  }
  strategies::FitResult fit = strategies::fit_factors(runs, with_measured);
  fit.factors.runs = f.runs;
  print_fit(fit, f);
  profile.factors = fit.factors;
  calibration::write_profile(profile, f.output);
  std::cout << fmt::format("wrote {} (factors{})\n", f.output,
                           profile.collectives.empty() ? "" : " and its collective tables");
  return 0;
}

}  // namespace

std::string render_factors(const calibration::FitFactors& factors) {
  std::string out = factor_table(factors).render();
  out += fmt::format("fitted to {} runs of {}: MAPE {:.2f}%", factors.run_count,
                     factors.runs.empty() ? "an unnamed file" : factors.runs, factors.mape_pct);
  if (factors.loo_mape_pct) out += fmt::format(", leave-one-out {:.2f}%", *factors.loo_mape_pct);
  return out + "\n";
}

Command add_calibrate_fit(CLI::App& calibrate) {
  auto flags = std::make_shared<FitFlags>();
  CLI::App* app = calibrate.add_subcommand(
      "fit", "fit compute, memory-bound and collective factors to measured runs into a profile");
  app->add_option("--runs", flags->runs, "measured runs (JSON records, docs/calibration.md)")
      ->required();
  app->add_option("--cluster", flags->cluster,
                  "cluster preset or JSON for runs without loom.cluster");
  app->add_option("-o,--output", flags->output,
                  "profile to write (kept collective tables if it exists)")
      ->required();
  app->add_option("--factors", flags->factors, "factors to fit: compute,memory,collective")
      ->capture_default_str();
  app->add_option("--network", flags->network, "network model: flow|analytical")
      ->check(CLI::IsMember({"flow", "analytical"}))
      ->capture_default_str();
  Command c;
  c.app = app;
  c.run = [flags]() { return run_fit(*flags); };
  return c;
}

}  // namespace loom::cli
