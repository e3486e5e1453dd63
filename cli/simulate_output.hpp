#pragma once
// What `loom simulate` prints: the table (with the notes that say what exposed
// communication, the bubble and the memory columns mean), the `results` block of the JSON
// document, and the CSV record. Include only from .cpp files.
#include <string>
#include <utility>
#include <vector>

#include "cli/band_output.hpp"
#include "common/document.hpp"
#include "models/model_spec.hpp"
#include "models/training_plan.hpp"
#include "strategies/step_simulator.hpp"
#include "topologies/cluster.hpp"

namespace loom::cli {

/// How the step was simulated, for the headers.
struct SimulateSetup {
  std::string network;      ///< flow | analytical | ideal
  bool full = false;        ///< every GPU simulated
  std::string calibration;  ///< profile path; empty: none
  std::string order;        ///< rank order, normalised ("tp-cp-ep-dp-pp")
};

/// The default rank order (Megatron's), which the table does not repeat.
inline constexpr const char* DEFAULT_ORDER = "tp-cp-ep-dp-pp";

/// The table: a warning first when the plan does not fit, the setup and plan lines, the
/// metrics with what MFU is measured against, notes, and memory per stage.
std::string render_simulate_table(const models::ModelSpec& model, const models::TrainingPlan& plan,
                                  const topo::Cluster& cluster, const strategies::StepReport& r,
                                  const SimulateSetup& setup);

/// The DESIGN.md `simulate` results block (times in seconds, sizes in bytes).
OrderedJson simulate_results_json(const models::TrainingPlan& plan, const strategies::StepReport& r,
                                  double capacity_bytes);

/// The plan's error bands on `cluster` (its first GPU type's architecture, all its GPUs).
PlanBands simulate_bands(const models::ModelSpec& model, const models::TrainingPlan& plan,
                         const topo::Cluster& cluster);
/// Adds the `<quantity>_band` pairs and the `bands` object (DESIGN.md) to a simulate results
/// block: step time, tokens/s, model TFLOP/s per GPU, MFU, memory.peak_bytes.
void add_simulate_bands(OrderedJson& results, const PlanBands& bands,
                        const strategies::StepReport& r);

/// The JSON context block: model, cluster, gpus, network, mode, order, plan, calibration.
OrderedJson simulate_context_json(const models::ModelSpec& model, const models::TrainingPlan& plan,
                                  const topo::Cluster& cluster, const SimulateSetup& setup);

/// One CSV record (header + row): setup, every plan field, then the results in base units.
std::string render_simulate_csv(const models::ModelSpec& model, const models::TrainingPlan& plan,
                                const topo::Cluster& cluster, const strategies::StepReport& r,
                                const SimulateSetup& setup);

/// The step's headline metrics as (name, value) rows, as the simulate table and the HTML
/// report's summary show them: step time, tokens/s, model and hardware TFLOP/s per GPU, MFU
/// (with its peak) and HFU, the pipeline bubble, compute and exposed communication.
std::vector<std::pair<std::string, std::string>> metric_rows(const models::TrainingPlan& plan,
                                                             const strategies::StepReport& r);

/// The band lines of step time, tokens/s, MFU and peak memory (band_line), as the table and
/// the HTML report show them.
std::vector<std::string> band_lines(const PlanBands& bands, const strategies::StepReport& r);

/// "24.2% of the BF16 dense peak" style text of a utilisation `fraction` against r's peak.
std::string utilisation_text(double fraction, const strategies::StepReport& r);

}  // namespace loom::cli
