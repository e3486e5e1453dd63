#include "cli/cmd_calibrate_network.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>

#include "cli/cluster_flags.hpp"
#include "common/error.hpp"
#include "common/table.hpp"
#include "sim/calibration/network_fit.hpp"
#include "strategies/rank_layout.hpp"

namespace loom::cli {

namespace {

using calibration::BoundStatus;
using calibration::FittedNetwork;

struct FitNetworkFlags {
  std::string profile;
  std::string cluster;
  std::string output;
};

// A file name without its folders ("a/b/x.log:12" -> "x.log:12"), for narrow tables.
std::string base_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string signed_pct(double ratio) {
  const double pct = 100 * (ratio - 1);
  return std::abs(pct) < 0.05 ? "0.0%" : fmt::format("{:+.1f}%", pct);
}

// What a parameter is, in the unit its value carries.
std::string meaning(calibration::NetworkParam p) {
  switch (p) {
    case calibration::NetworkParam::NVLINK_EFFICIENCY:
      return "x NVLink line rate per port";
    case calibration::NetworkParam::NIC_EFFICIENCY:
      return "x NIC line rate per rail";
    case calibration::NetworkParam::NVLS_EFFICIENCY:
      return "NVLink SHARP efficiency";
    case calibration::NetworkParam::INTRA_LATENCY_SCALE:
      return "x NCCL baseLat, NVLink/PCI hwLat";
    case calibration::NetworkParam::NET_LATENCY_SCALE:
      return "x NCCL NET hwLat per step";
    case calibration::NetworkParam::SIMPLE_LATENCY_SCALE:
      return "x the Simple protocol's latencies";
  }
  return "";
}

std::string status_text(const calibration::NetworkParameter& p) {
  switch (p.status) {
    case BoundStatus::FITTED:
      return "fitted";
    case BoundStatus::AT_LOWER:
      return "at lower bound";
    case BoundStatus::AT_UPPER:
      return p.upper == 1.0 && p.param != calibration::NetworkParam::INTRA_LATENCY_SCALE &&
                     p.param != calibration::NetworkParam::NET_LATENCY_SCALE &&
                     p.param != calibration::NetworkParam::SIMPLE_LATENCY_SCALE
                 ? "at bound (line rate)"
                 : "at upper bound";
    case BoundStatus::PRIOR:
      return "default (no row depends on it)";
  }
  return "";
}

Table parameter_table(const FittedNetwork& n) {
  Table t({"parameter", "default", "fitted", "+-1 sigma", "bounds", "status", "meaning"});
  t.align_left(0);
  t.align_left(5);
  t.align_left(6);
  for (const auto& p : n.parameters) {
    t.add_row({to_string(p.param), fmt::format("{:.3f}", p.prior), fmt::format("{:.3f}", p.value),
               fmt::format("{:.3f}", p.sigma), fmt::format("[{:g}, {:g}]", p.lower, p.upper),
               status_text(p), meaning(p.param)});
  }
  return t;
}

Table row_table(const FittedNetwork& n) {
  Table t({"log", "op", "ranks", "nodes", "size(B)", "measured(us)", "uncal(us)", "err",
           "fitted(us)", "err", "role"});
  t.align_left(0);
  t.align_left(1);
  t.align_left(10);
  for (const auto& r : n.rows) {
    const auto& o = r.observation;
    t.add_row({base_name(o.source.empty() ? o.log : o.source), sim::to_string(o.op),
               std::to_string(o.group_size), std::to_string(o.nodes),
               fmt::format("{:.0f}", o.bytes), fmt::format("{:.2f}", o.seconds * 1e6),
               fmt::format("{:.2f}", r.uncalibrated_seconds * 1e6),
               signed_pct(r.uncalibrated_seconds / o.seconds),
               fmt::format("{:.2f}", r.fitted_seconds * 1e6),
               signed_pct(r.fitted_seconds / o.seconds), calibration::to_string(r.role)});
  }
  return t;
}

std::string transfer_tables(const FittedNetwork& n) {
  std::string out;
  if (n.leave_one_out.empty()) {
    return "\nleave-one-log-out: needs two or more logs in the profile (this one has one)\n";
  }
  out +=
      "\nleave-one-log-out (each log predicted by the parameters fitted on the others; "
      "busbw in GB/s, sizes >= 64 MiB)\n";
  for (const auto& t : n.leave_one_out) {
    std::string on;
    for (const auto& l : t.fitted_on) on += (on.empty() ? "" : ", ") + base_name(l);
    out += fmt::format("\nheld out {} ({} on {} ranks, {} node{}), fitted on {}\n",
                       base_name(t.held_out), sim::to_string(t.op), t.group_size, t.nodes,
                       t.nodes == 1 ? "" : "s", on);
    Table tab({"size(B)", "measured", "uncalibrated", "err", "calibrated", "err"});
    for (const auto& r : t.rows) {
      tab.add_row({fmt::format("{:.0f}", r.bytes), fmt::format("{:.2f}", r.measured_busbw_GBps),
                   fmt::format("{:.2f}", r.uncalibrated_busbw_GBps),
                   signed_pct(r.uncalibrated_busbw_GBps / r.measured_busbw_GBps),
                   fmt::format("{:.2f}", r.calibrated_busbw_GBps),
                   signed_pct(r.calibrated_busbw_GBps / r.measured_busbw_GBps)});
    }
    out += t.rows.empty() ? "(no size >= 64 MiB)\n" : tab.render();
  }
  return out;
}

int run_fit_network(const FitNetworkFlags& f) {
  calibration::Profile profile = calibration::read_profile(f.profile);
  const auto rows = calibration::observations_of(profile);
  if (rows.empty()) {
    throw ValidationError("profile", fmt::format("profile: {} holds no collective table; import "
                                                 "nccl-tests logs first (loom calibrate import)",
                                                 f.profile));
  }
  const std::string cluster_name = f.cluster;
  calibration::ClusterCache clusters([cluster_name](int nodes) {
    ClusterFlags flags;
    flags.cluster = cluster_name;
    flags.nodes = nodes;
    return resolve_cluster(flags);
  });
  (void)clusters.of(1);  // a bad --cluster fails here, before any fit
  FittedNetwork network = calibration::fit_network(rows, clusters);
  network.cluster = f.cluster;
  profile.network = network;
  const std::string output = f.output.empty() ? f.profile : f.output;
  std::cout << fmt::format("# loom calibrate fit-network: {} rows of {} on {}\n", rows.size(),
                           f.profile, f.cluster);
  std::cout << render_fitted_network(network);
  calibration::write_profile(profile, output);
  std::cout << fmt::format("wrote {} (network parameters beside the collective tables)\n", output);
  return 0;
}

}  // namespace

std::string render_fitted_network(const FittedNetwork& n) {
  int fitted = 0;
  for (const auto& r : n.rows)
    fitted += r.role == calibration::RowRole::BANDWIDTH || r.role == calibration::RowRole::LATENCY;
  std::string out = fmt::format(
      "\nnetwork fitted on {} ({}; links {}) to {} logged on {}: {} of {} rows fitted, rms "
      "ln(model/measured) {:.3f}\n",
      n.cluster, n.gpu, n.fabric, n.measured_gpu.empty() ? "devices" : n.measured_gpu,
      n.measured_gpu.empty() ? "an unnamed GPU" : "that GPU", fitted, n.rows.size(),
      n.rms_log_residual);
  out += parameter_table(n).render();
  out +=
      "\nrows (role: bandwidth = fitted to bandwidths, latency = fitted to latencies, mixed = "
      "shown only; by the model's latency share of the row's time)\n";
  out += row_table(n).render();
  out += transfer_tables(n);
  return out;
}

OrderedJson coverage_json(const std::string& profile, const FittedNetwork& network,
                          const std::vector<CoveredGroup>& groups,
                          const std::vector<std::string>& notes) {
  OrderedJson j;
  j["profile"] = profile;
  j["network_fitted_on"] = {{"cluster", network.cluster},
                            {"gpu", network.gpu},
                            {"measured_gpu", network.measured_gpu},
                            {"fabric", network.fabric}};
  OrderedJson fitted = OrderedJson::array(), defaults = OrderedJson::array();
  for (const auto& g : groups) {
    OrderedJson e = {
        {"kind", g.kind}, {"ranks", g.ranks}, {"nodes", g.nodes}, {"reason", g.coverage.reason}};
    (g.coverage.fitted ? fitted : defaults).push_back(e);
  }
  j["collectives_fitted"] = fitted;
  j["defaults"] = defaults;
  j["notes"] = notes;
  return j;
}

std::string coverage_note(const std::vector<CoveredGroup>& groups) {
  std::string out;
  for (const auto& g : groups) {
    out += fmt::format("calibration: {} ({} ranks over {} node{}): {} ({})\n", g.kind, g.ranks,
                       g.nodes, g.nodes == 1 ? "" : "s",
                       g.coverage.fitted ? "fitted network" : "loom's defaults", g.coverage.reason);
  }
  return out;
}

int nodes_spanned(const std::vector<int>& group, const topo::Cluster& cluster) {
  std::vector<int> nodes;
  for (int r : group) nodes.push_back(cluster.node_of_rank(r));
  std::sort(nodes.begin(), nodes.end());
  return static_cast<int>(std::unique(nodes.begin(), nodes.end()) - nodes.begin());
}

std::vector<CoveredGroup> plan_coverage(const FittedNetwork& network,
                                        const models::TrainingPlan& plan, const std::string& order,
                                        const topo::Cluster& cluster) {
  const strategies::RankLayout layout(plan, order);
  std::vector<CoveredGroup> out;
  using strategies::Dim;
  for (Dim d : {Dim::TP, Dim::CP, Dim::EP, Dim::DP, Dim::PP}) {
    if (layout.size(d) < 2) continue;
    const auto groups = layout.groups(d);
    // The widest group of the dimension: the one that crosses the most nodes.
    int nodes = 1;
    for (const auto& g : groups) nodes = std::max(nodes, nodes_spanned(g, cluster));
    out.push_back(
        {strategies::to_string(d), layout.size(d), nodes, calibration::coverage(network, nodes)});
  }
  return out;
}

std::vector<std::string> fitted_network_notes(const FittedNetwork& network,
                                              const topo::Cluster& cluster) {
  std::vector<std::string> notes = calibration::mismatch_notes(network, cluster);
  for (auto& n : notes) n += "; its fitted parameters may not transfer";
  return notes;
}

std::optional<NetworkCalibration> apply_fitted_network(const std::string& path,
                                                       const topo::Cluster& cluster,
                                                       strategies::SimulateOptions& options,
                                                       bool quiet) {
  calibration::Profile profile = calibration::read_profile(path);
  if (!profile.network) return std::nullopt;
  NetworkCalibration out{*profile.network, fitted_network_notes(*profile.network, cluster)};
  options.link_efficiency = out.network.link_efficiency();
  options.nccl_tuning = out.network.nccl_tuning();
  // Efficiencies `calibrate fit` fitted to step times (on top of this network) win.
  if (profile.factors && profile.factors->nvlink_efficiency)
    options.link_efficiency.nvlink = *profile.factors->nvlink_efficiency;
  if (profile.factors && profile.factors->network_efficiency) {
    const double e = *profile.factors->network_efficiency;
    options.link_efficiency.infiniband = options.link_efficiency.roce =
        options.link_efficiency.ethernet = e;
  }
  options.collective_override = nullptr;
  if (!quiet)
    for (const auto& note : out.notes) std::cerr << "loom: note: " << note << "\n";
  return out;
}

NetworkCalibration require_fitted_network(const std::string& path, const topo::Cluster* cluster,
                                          const std::string& gpu,
                                          strategies::SimulateOptions& options, bool quiet) {
  calibration::Profile profile = calibration::read_profile(path);
  if (!profile.network) {
    throw ValidationError("--calibration",
                          fmt::format("--calibration: {} has no fitted network; run `loom "
                                      "calibrate fit-network {} --cluster C` first",
                                      path, path));
  }
  NetworkCalibration out{*profile.network, {}};
  if (cluster) {
    out.notes = fitted_network_notes(out.network, *cluster);
  } else if (!out.network.gpu.empty() && out.network.gpu != gpu) {
    out.notes.push_back(
        fmt::format("the network was fitted on {} GPUs, this target has {}; its "
                    "fitted parameters may not transfer",
                    out.network.gpu, gpu));
  }
  options.link_efficiency = out.network.link_efficiency();
  options.nccl_tuning = out.network.nccl_tuning();
  if (!quiet)
    for (const auto& note : out.notes) std::cerr << "loom: note: " << note << "\n";
  return out;
}

std::vector<CoveredGroup> tier_coverage(const FittedNetwork& network, int gpus_per_node) {
  return {{"intra-node", gpus_per_node, 1, calibration::coverage(network, 1)},
          {"inter-node", 2 * gpus_per_node, 2, calibration::coverage(network, 2)}};
}

Command add_calibrate_fit_network(CLI::App& calibrate) {
  auto flags = std::make_shared<FitNetworkFlags>();
  CLI::App* app = calibrate.add_subcommand(
      "fit-network",
      "fit loom's network parameters (NVLink, NIC, NVLS efficiency, NCCL latencies) to a "
      "profile's collective tables");
  app->add_option("profile", flags->profile, "profile with collective tables (calibrate import)")
      ->required();
  app->add_option("--cluster", flags->cluster,
                  "the cluster the logs were measured on: preset (dgx-h100) or cluster JSON")
      ->required();
  app->add_option("-o,--output", flags->output, "profile to write (default: the input profile)");
  Command c;
  c.app = app;
  c.run = [flags]() { return run_fit_network(*flags); };
  return c;
}

}  // namespace loom::cli
