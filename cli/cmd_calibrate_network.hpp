#pragma once
// `loom calibrate fit-network`: fits the physical parameters of loom's collective model to a
// profile's collective tables and writes them into the profile (docs/calibration.md "Fitting
// the network"); the rendering `calibrate show` prints; and how `--calibration` applies a
// fitted network (collective, simulate) and says what it covered.
#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "common/document.hpp"
#include "models/training_plan.hpp"
#include "sim/calibration/profile.hpp"
#include "sim/engine.hpp"
#include "strategies/step_simulator.hpp"
#include "topologies/cluster.hpp"

namespace loom::cli {

/// Adds the `fit-network` subcommand to `calibrate`.
Command add_calibrate_fit_network(CLI::App& calibrate);

/// The fitted parameters beside their defaults (bounds, status, uncertainty), every input
/// row's residual and the leave-one-log-out table, as `calibrate show` prints them.
std::string render_fitted_network(const calibration::FittedNetwork& network);

/// One collective shape a simulation ran, and whether the fitted network covered it.
struct CoveredGroup {
  std::string kind;  ///< "tp", "dp", ... or the op's name (`collective`)
  int ranks = 0, nodes = 0;
  calibration::Coverage coverage;
};

/// The `calibration` JSON object: {profile, network_fitted_on, collectives_fitted: [...],
/// defaults: [...], notes: [...]}.
OrderedJson coverage_json(const std::string& profile, const calibration::FittedNetwork& network,
                          const std::vector<CoveredGroup>& groups,
                          const std::vector<std::string>& notes);
/// The note lines under a table: which groups used fitted parameters, which defaults.
std::string coverage_note(const std::vector<CoveredGroup>& groups);

/// The groups of a plan on `cluster` (tp, cp, ep, dp, pp of more than one rank, in the rank
/// `order`), each with the nodes its first group spans and its coverage by `network`.
std::vector<CoveredGroup> plan_coverage(const calibration::FittedNetwork& network,
                                        const models::TrainingPlan& plan, const std::string& order,
                                        const topo::Cluster& cluster);
/// Coverage by tier, for commands that simulate many plans (search, plan): one node of
/// `gpus_per_node` ranks, and ranks across nodes.
std::vector<CoveredGroup> tier_coverage(const calibration::FittedNetwork& network,
                                        int gpus_per_node);
/// The nodes the ranks of `group` span.
int nodes_spanned(const std::vector<int>& group, const topo::Cluster& cluster);
/// The stderr notes of applying `network` to `cluster` (GPU or fabric differ), each a
/// sentence; empty when they match.
std::vector<std::string> fitted_network_notes(const calibration::FittedNetwork& network,
                                              const topo::Cluster& cluster);

/// What `--calibration PROFILE` did to a simulation's network.
struct NetworkCalibration {
  calibration::FittedNetwork network;
  std::vector<std::string> notes;  ///< GPU or fabric mismatch (also printed on stderr)
};
/// Reads the profile at `path`; when it holds a fitted network, sets the link efficiencies
/// and NCCL scales of `options` from it and drops the measured-time replay (the model with
/// fitted parameters times every collective), and prints the mismatch notes on stderr unless
/// `quiet`. nullopt when the profile has no fitted network.
std::optional<NetworkCalibration> apply_fitted_network(const std::string& path,
                                                       const topo::Cluster& cluster,
                                                       strategies::SimulateOptions& options,
                                                       bool quiet);
/// apply_fitted_network for search and plan: a profile without a fitted network is an error
/// (ValidationError on `--calibration`: fit it first), and the GPU check is against `gpu`
/// (a catalog key) when no cluster is at hand (cluster null).
NetworkCalibration require_fitted_network(const std::string& path, const topo::Cluster* cluster,
                                          const std::string& gpu,
                                          strategies::SimulateOptions& options, bool quiet);

}  // namespace loom::cli
