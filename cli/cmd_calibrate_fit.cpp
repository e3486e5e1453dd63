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
#include "sim/calibration/kernel_fit_profile.hpp"
#include "sim/calibration/profile.hpp"
#include "strategies/calibration/factor_fit.hpp"
#include "strategies/calibration/run_records.hpp"

namespace loom::cli {
namespace {

struct FitFlags {
  std::string runs;
  std::string cluster;
  std::string output;
  std::string factors = "compute,memory,network,host";
  std::string network = "flow";
};

std::string signed_pct(double ratio) {
  const double pct = 100 * (ratio - 1);
  return std::abs(pct) < 0.005 ? "0.00%" : fmt::format("{:+.2f}%", pct);  // no "-0.00%"
}

strategies::FitOptions fit_options(const FitFlags& f) {
  strategies::FitOptions o;
  o.compute = o.memory = o.network = o.host = o.collective = false;
  std::istringstream list(f.factors);
  for (std::string name; std::getline(list, name, ',');) {
    if (name == "compute")
      o.compute = true;
    else if (name == "memory")
      o.memory = true;
    else if (name == "network")
      o.network = true;
    else if (name == "host")
      o.host = true;
    else if (name == "collective")
      o.collective = true;
    else
      throw ValidationError::bad_value("--factors", name,
                                       "compute, memory, network, host, collective "
                                       "(comma-separated)");
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
  if (x.nvlink_efficiency)
    factors.add_row({"nvlink efficiency", fmt::format("{:.4f}", *x.nvlink_efficiency)});
  if (x.network_efficiency)
    factors.add_row({"inter-node efficiency", fmt::format("{:.4f}", *x.network_efficiency)});
  if (x.host_launch_time)
    factors.add_row({"host launch time", fmt::format("{:.4f}", *x.host_launch_time)});
  return factors;
}

// Each fitted factor beside its default, with bounds, status, uncertainty and its range over
// the leave-one-out fits.
Table fitted_table(const strategies::FitResult& fit) {
  Table t({"factor", "default", "fitted", "lower", "upper", "status", "±1σ", "leave-one-out"});
  t.align_left(0);
  t.align_left(5);
  for (const auto& f : fit.fitted) {
    const auto& p = f.parameter;
    t.add_row({p.name, fmt::format("{:.4f}", p.prior), fmt::format("{:.4f}", p.value),
               fmt::format("{:.4f}", p.lower), fmt::format("{:.4f}", p.upper),
               std::string(topo::to_string(p.status)), fmt::format("{:.1f}%", 100 * p.log_sigma),
               f.loo_max > 0 ? fmt::format("{:.4f}-{:.4f}", f.loo_min, f.loo_max) : "-"});
  }
  return t;
}

void print_fit(const strategies::FitResult& fit, const FitFlags& f) {
  std::cout << fmt::format("# loom calibrate fit: {} runs from {}, network {}\n\n", fit.runs.size(),
                           f.runs, f.network);
  const auto& x = fit.factors;
  if (fit.fitted.empty())
    std::cout << "no factor fitted: every factor keeps its default\n\n";
  else
    std::cout << fitted_table(fit).render() << "\n";
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
  std::cout << fmt::format("\nMAPE of step time: uncalibrated {:.2f}%, fitted {:.2f}%",
                           fit.model_mape_pct, x.mape_pct);
  if (x.loo_mape_pct) std::cout << fmt::format(", leave-one-out {:.2f}%", *x.loo_mape_pct);
  std::cout << fmt::format(" ({} simulations)\n", fit.simulations);
  for (const auto& note : fit.notes) std::cout << "note: " << note << "\n";
  for (const auto& warning : fit.warnings) std::cerr << "loom: warning: " << warning << "\n";
}

// The profile's kernel measurements, as simulate --calibration uses them: the factors are fitted
// on top of the fitted kernel model (they wrap it at simulate time too). Only when every run
// is on one GPU model (the fit is of that GPU); returns a note saying what was done.
std::string use_fitted_kernels(const calibration::Profile& profile, const std::string& path,
                               const std::vector<strategies::MeasuredRun>& runs,
                               strategies::FitOptions& options) {
  if (!calibration::has_kernel_samples(profile) || runs.empty()) return "";
  const topo::GpuSpec gpu = runs.front().cluster_ref()->gpu;
  for (const auto& r : runs) {
    if (r.cluster_ref()->gpu.name != gpu.name)
      return fmt::format(
          "the profile's kernel measurements are not used: the runs are on several GPU models");
  }
  calibration::KernelFitUse use;
  options.simulate.kernels =
      calibration::fitted_kernel_model(profile, path, gpu, options.simulate.efficiency, use);
  return fmt::format("factors fitted on top of the profile's fitted kernel model of the {}",
                     gpu.name);
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
  if (profile.network) {
    // A fitted network times collectives through the model with its parameters.
    with_measured.simulate.link_efficiency = profile.network->link_efficiency();
    with_measured.simulate.nccl_tuning = profile.network->nccl_tuning();
  } else if (!profile.collectives.empty()) {
    with_measured.simulate.collective_override =
        std::make_shared<calibration::MeasuredCollectives>(profile);
  }
  const std::string kernels = use_fitted_kernels(profile, f.output, runs, with_measured);
  strategies::FitResult fit = strategies::fit_factors(runs, with_measured);
  if (!kernels.empty()) fit.notes.push_back(kernels);
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
      "fit",
      "fit bounded compute, memory, network and host factors to measured runs into a profile");
  app->add_option("--runs", flags->runs, "measured runs (JSON records, docs/calibration.md)")
      ->required();
  app->add_option("--cluster", flags->cluster,
                  "cluster preset or JSON for runs without loom.cluster");
  app->add_option("-o,--output", flags->output,
                  "profile to write (kept collective tables if it exists)")
      ->required();
  app->add_option("--factors", flags->factors,
                  "factors to fit: compute,memory,network,host (and collective)")
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
