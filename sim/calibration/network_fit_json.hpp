#pragma once
// The `network` section of a calibration profile (a FittedNetwork) as JSON: written by
// `loom calibrate fit-network`, read with the profile (docs/calibration.md).
#include "common/document.hpp"
#include "common/json_util.hpp"
#include "sim/calibration/network_fit.hpp"

namespace loom::calibration {

/// The section's JSON object.
OrderedJson fitted_network_to_json(const FittedNetwork& network);
/// Reads the section; throws ConfigError naming the file and JSON pointer of a bad field.
FittedNetwork read_fitted_network(ObjectReader r);

}  // namespace loom::calibration
