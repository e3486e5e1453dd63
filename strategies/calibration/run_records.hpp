#pragma once
// Measured training runs for `loom calibrate fit`: records in the reference schema
// (docs/calibration.md "Runs file": id, model, hardware, parallelism, batch, seq_len,
// recompute, precision, measured) read into what simulate_step needs, each with the step
// time the run measured. A record's optional "loom" object says what the schema cannot:
// the loom model (preset or file), the cluster, and plan keys laid over the mapped ones.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/model_spec.hpp"
#include "models/training_plan.hpp"
#include "topologies/cluster.hpp"

namespace loom::strategies {

/// One measured run, ready to simulate.
struct MeasuredRun {
  std::string id;     ///< the record's id
  std::string where;  ///< "FILE#/runs/3": where messages point
  models::ModelSpec model;
  models::TrainingPlan plan;
  std::shared_ptr<const topo::Cluster> cluster;
  double step_s = 0;  ///< measured step time, seconds (from iteration_time_s or tokens/s)
};

/// Reads the runs file at `path`: a JSON array of records or {"runs": [...]}. Each record's
/// cluster is its loom.cluster, else `default_cluster` (preset or file), with
/// hardware.num_gpus GPUs. Throws ConfigError naming the file and JSON pointer (and the fix)
/// on a malformed record, a missing measurement or cluster; PlanError / ValidationError for
/// a plan loom cannot run.
std::vector<MeasuredRun> read_runs(const std::string& path,
                                   const std::optional<std::string>& default_cluster);

}  // namespace loom::strategies
