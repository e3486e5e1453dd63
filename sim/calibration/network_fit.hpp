#pragma once
// The network fit: the physical parameters of loom's own collective model (link payload
// efficiencies, NVLink SHARP efficiency, NCCL's per-step latencies) fitted to measured
// collective times, so that a calibration measured on some node counts, sizes and ops
// predicts the others through the model (docs/calibration.md, "Fitting the network").
//
// Each parameter starts from its datasheet / NCCL value (the prior), stays inside its
// physical bounds (an efficiency never above 1: the datasheet line rate; a latency >= 0), and
// is reported with its bound status and a 1-sigma uncertainty from the curvature of the
// weighted least squares in log time. The fit is deterministic: Levenberg-Marquardt over the
// log-parameters with forward-difference Jacobians, from the prior.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/collectives.hpp"
#include "sim/fabric.hpp"
#include "sim/network.hpp"
#include "topologies/cluster.hpp"

namespace loom::calibration {

struct Profile;

/// Where a fitted parameter ended.
enum class BoundStatus {
  FITTED,    ///< inside its bounds, moved by the data
  AT_LOWER,  ///< pinned at its lower bound
  AT_UPPER,  ///< pinned at its upper bound (an efficiency: the datasheet line rate)
  PRIOR      ///< no fitted row depends on it: kept at its default
};
/// "fitted", "at_lower_bound", "at_upper_bound", "prior".
std::string to_string(BoundStatus status);
/// The status of a name (to_string's); throws ValidationError naming `field` otherwise.
BoundStatus parse_bound_status(const std::string& name, const std::string& field);

/// The parameters of loom's collective model a fit may move, in this order.
enum class NetworkParam {
  NVLINK_EFFICIENCY,    ///< payload fraction of an NVLink port's line rate (LinkEfficiency)
  NIC_EFFICIENCY,       ///< payload fraction of a NIC's (rail's) line rate (IB, RoCE, Ethernet)
  NVLS_EFFICIENCY,      ///< NVLink SHARP efficiency (NCCL nvlsEfficiency)
  INTRA_LATENCY_SCALE,  ///< x NCCL's baseLat and NVLINK/PCI hwLat rows
  NET_LATENCY_SCALE,    ///< x NCCL's NET hwLat rows (per inter-node step)
  SIMPLE_LATENCY_SCALE  ///< x every latency of the Simple protocol (its size ramp)
};
inline constexpr int NETWORK_PARAM_COUNT = 6;
/// "nvlink_efficiency", "nic_efficiency", "nvls_efficiency", "intra_latency_scale",
/// "net_latency_scale", "simple_latency_scale".
std::string to_string(NetworkParam param);

/// Sets `param` to `value` in the engine's link efficiencies or NCCL scales.
void set_parameter(NetworkParam param, double value, sim::LinkEfficiency& efficiency,
                   sim::NcclTuning& tuning);

/// One fitted parameter.
struct NetworkParameter {
  NetworkParam param = NetworkParam::NVLINK_EFFICIENCY;
  double value = 0;  ///< fitted value (efficiency: fraction of line rate; scale: x NCCL's)
  double prior = 0;  ///< the default loom uses uncalibrated
  double lower = 0, upper = 0;  ///< physical bounds
  double sigma = 0;             ///< 1-sigma uncertainty, same unit as value (0: not fitted)
  BoundStatus status = BoundStatus::PRIOR;
};

/// One measured collective time the fit sees.
struct NetworkObservation {
  sim::CollectiveOp op = sim::CollectiveOp::ALL_REDUCE;
  int group_size = 0;
  int nodes = 0;
  double bytes = 0;    ///< nccl-tests "size", bytes
  double seconds = 0;  ///< measured time, seconds
  /// The algorithm the measurement forced (NCCL_ALGO); AUTO: NCCL's tuner chose.
  sim::Algorithm algorithm = sim::Algorithm::AUTO;
  double weight = 1.0;  ///< row weight (0: an outlier, residual shown but not fitted)
  std::string gpu;      ///< the device the log names
  std::string log;      ///< the log (file) it came from: the leave-one-log-out unit
  std::string source;   ///< "file:line"
};

/// What the fit did with a row.
enum class RowRole { BANDWIDTH, LATENCY, MIXED, OUTLIER };
/// "bandwidth", "latency", "mixed", "outlier".
std::string to_string(RowRole role);

/// One input row's fit: measured, uncalibrated (prior) and fitted model times.
struct NetworkRow {
  NetworkObservation observation;
  double uncalibrated_seconds = 0;
  double fitted_seconds = 0;
  /// BANDWIDTH: the model's latency share of its time <= 5% at the prior (fits the
  /// bandwidths); LATENCY: >= 80% (fits the latencies); MIXED: neither (residual only).
  RowRole role = RowRole::MIXED;
};

/// Leave-one-log-out: one log predicted by parameters fitted on the others.
struct TransferRow {
  double bytes = 0;
  double measured_busbw_GBps = 0;
  double uncalibrated_busbw_GBps = 0;
  double calibrated_busbw_GBps = 0;
};
struct TransferTable {
  std::string held_out;                ///< the log predicted
  std::vector<std::string> fitted_on;  ///< the logs the parameters came from
  sim::CollectiveOp op = sim::CollectiveOp::ALL_REDUCE;
  int group_size = 0, nodes = 0;
  std::vector<TransferRow> rows;  ///< sizes >= TRANSFER_MIN_BYTES
};
/// The smallest size the leave-one-log-out table reports (64 MiB: bandwidth-bound).
inline constexpr double TRANSFER_MIN_BYTES = 64.0 * 1024 * 1024;

/// A fitted network (the profile's `network` section).
struct FittedNetwork {
  std::string cluster;       ///< the cluster the model ran on while fitting (its name)
  std::string gpu;           ///< that cluster's GPU (loom's catalog name)
  std::string measured_gpu;  ///< the device the logs name
  std::string fabric;        ///< fabric_signature() of that cluster
  std::vector<NetworkParameter> parameters;  ///< NetworkParam order, present ones only
  std::vector<NetworkRow> rows;              ///< every input row, in input order
  std::vector<TransferTable> leave_one_out;  ///< one per log when there are >= 2 logs
  double rms_log_residual = 0;               ///< over the fitted rows, ln(model / measured)
  int iterations = 0;

  /// The parameter, or nullptr when the fit did not carry it.
  const NetworkParameter* find(NetworkParam param) const;
  /// Engine link efficiencies with the fitted values (the rest loom's defaults).
  sim::LinkEfficiency link_efficiency() const;
  /// NCCL constant scales with the fitted values.
  sim::NcclTuning nccl_tuning() const;
};

/// The clusters a fit runs its model on: the factory builds one of `nodes` nodes of the
/// user's cluster (e.g. a preset with --nodes); each is built once.
class ClusterCache {
 public:
  explicit ClusterCache(std::function<topo::Cluster(int nodes)> factory)
      : factory_(std::move(factory)) {}
  /// The cluster of `nodes` nodes (built on first use).
  const topo::Cluster& of(int nodes);

 private:
  std::function<topo::Cluster(int)> factory_;
  std::vector<std::pair<int, std::unique_ptr<topo::Cluster>>> built_;
};

/// A short description of a cluster's links: each NVLink and NIC kind with its line rate
/// per link and direction ("nvlink 25 GB/s; infiniband 50 GB/s"); used to warn when a
/// profile is applied to another fabric.
std::string fabric_signature(const topo::Cluster& cluster);

/// loom's time of one collective, seconds: the group is `group_size` / `nodes` ranks (local
/// ranks 0, 1, ...) on each of the first `nodes` nodes of `cluster`, run alone on `mode`'s
/// network with the given link efficiencies and NCCL scales. Throws ValidationError when the
/// group does not fit the cluster.
double model_seconds(const topo::Cluster& cluster, const NetworkObservation& row,
                     const sim::LinkEfficiency& efficiency, const sim::NcclTuning& tuning,
                     sim::NetworkMode mode = sim::NetworkMode::FLOW);

/// The rows of a profile's collective tables (every point, weight 1, algorithm AUTO; the
/// log is the table's source).
std::vector<NetworkObservation> observations_of(const Profile& profile);

/// Fits the parameters to `rows` on `clusters` (see file comment). `with_leave_one_out`:
/// also refit once per log without it. Throws CalibrationError when no row is usable and
/// ValidationError when a row's group does not fit the cluster.
FittedNetwork fit_network(const std::vector<NetworkObservation>& rows, ClusterCache& clusters,
                          bool with_leave_one_out = true);

/// Which collectives a fitted network covers: "fitted" when the bandwidth parameter of the
/// slowest tier the group crosses was fitted (NIC across nodes; NVLink or NVLS inside one),
/// else "defaults", with the reason.
struct Coverage {
  bool fitted = false;
  std::string reason;  ///< e.g. "nic_efficiency fitted" / "no inter-node row in the profile"
};
Coverage coverage(const FittedNetwork& network, int nodes);

/// The stderr notes for applying `network` to `cluster` (empty when GPU and fabric match).
std::vector<std::string> mismatch_notes(const FittedNetwork& network, const topo::Cluster& cluster);

}  // namespace loom::calibration
