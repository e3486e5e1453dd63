#pragma once
// Measured training runs for `loom calibrate fit`: records in the reference schema
// (docs/calibration.md "Runs file": id, model, hardware, parallelism, batch, seq_len,
// recompute, precision, measured) read into what simulate_step needs, each with the step
// time the run measured. A record's optional "loom" object says what the schema cannot:
// the loom model (preset or file), the cluster, and plan keys laid over the mapped ones.
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/model_spec.hpp"
#include "models/training_plan.hpp"
#include "topologies/cluster.hpp"

namespace loom::strategies {

/// Clusters built for runs by (cluster preset or file, GPU count), at most `capacity` held at
/// once: the least recently used is dropped first (a runs file naming many GPU counts of a
/// large cluster would otherwise hold every one; a cluster of many GPUs takes hundreds of MB).
class ClusterCache {
 public:
  /// Clusters held at once by default: the distinct clusters of a typical runs file.
  static constexpr size_t DEFAULT_CAPACITY = 4;
  /// `capacity` >= 1.
  explicit ClusterCache(size_t capacity = DEFAULT_CAPACITY);
  /// The cluster `name` (preset or file) with `gpus` GPUs, built when not held; throws as
  /// topo::load_cluster does.
  std::shared_ptr<const topo::Cluster> get(const std::string& name, int gpus);
  /// Clusters held now (<= capacity()).
  size_t held() const { return entries_.size(); }
  size_t capacity() const { return capacity_; }
  /// Clusters built so far (a rebuild after eviction counts again).
  int builds() const { return builds_; }

 private:
  struct Entry {
    std::string name;
    int gpus = 0;
    std::shared_ptr<const topo::Cluster> cluster;
  };
  size_t capacity_;
  std::list<Entry> entries_;  // most recently used first
  int builds_ = 0;
};

/// One measured run, ready to simulate.
struct MeasuredRun {
  std::string id;     ///< the record's id
  std::string where;  ///< "FILE#/runs/3": where messages point
  models::ModelSpec model;
  models::TrainingPlan plan;
  /// The run's cluster when given directly; null: built on demand from cluster_name and gpus
  /// through `clusters` (read_runs).
  std::shared_ptr<const topo::Cluster> cluster;
  std::string cluster_name;  ///< preset or file (when `cluster` is null)
  int gpus = 0;              ///< GPU count (when `cluster` is null)
  std::shared_ptr<ClusterCache> clusters;
  double step_s = 0;  ///< measured step time, seconds (from iteration_time_s or tokens/s)

  /// The run's cluster: `cluster`, else the cache's.
  std::shared_ptr<const topo::Cluster> cluster_ref() const;
};

/// Reads the runs file at `path`: a JSON array of records or {"runs": [...]}. Each record's
/// cluster is its loom.cluster, else `default_cluster` (preset or file), with
/// hardware.num_gpus GPUs. Throws ConfigError naming the file and JSON pointer (and the fix)
/// on a malformed record, a missing measurement or cluster; PlanError / ValidationError for
/// a plan loom cannot run. The runs share one ClusterCache of `cluster_capacity` clusters.
std::vector<MeasuredRun> read_runs(const std::string& path,
                                   const std::optional<std::string>& default_cluster,
                                   size_t cluster_capacity = ClusterCache::DEFAULT_CAPACITY);

}  // namespace loom::strategies
