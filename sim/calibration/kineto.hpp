#pragma once
// The PyTorch profiler (Kineto) trace importer: the Chrome-trace JSON that
// `torch.profiler.profile(...).export_chrome_trace()` and `tensorboard_trace_handler` write
// (plain `.json` or gzipped `.json.gz`), summarised per kernel class and step
// (calibration/trace_summary.hpp). Field names follow libkineto's ChromeTraceLogger
// (output_json.cpp) and PyTorch's profiler_kineto.cpp; docs/calibration.md lists them.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/calibration/trace_summary.hpp"
#include "sim/collectives.hpp"

namespace loom::calibration {

/// Whether `text` is a Chrome trace: a JSON object (first non-blank byte `{`) with a
/// "traceEvents" key. A cut-off trace still looks like one (and fails to parse, by line).
bool looks_like_kineto(std::string_view text);

/// The class of a device activity (kernel_class_names()) from its trace category ("kernel",
/// "gpu_memcpy", "gpu_memset") and name; NCCL kernels get "nccl:<op>" from `collective`
/// (a "Collective name" argument) when given, else from the kernel name.
std::string classify_activity(std::string_view category, std::string_view name,
                              std::string_view collective = "");

/// The loom collective named by a kernel name ("ncclDevKernel_AllGather_RING_LL") or a
/// PyTorch "Collective name" ("_allgather_base", "allreduce"); nullopt when it names none.
std::optional<sim::CollectiveOp> collective_of(std::string_view name);

/// A GEMM's dtype and shape from its CPU op name and "Input Dims" / "Input type" arguments
/// (aten::mm, addmm, _addmm_activation, bmm, baddbmm, matmul, linear, _scaled_mm).
struct GemmShape {
  std::string dtype;  ///< loom spelling ("bf16"), or the trace's when loom has none
  std::int64_t batch = 1, m = 0, n = 0, k = 0;
};

/// Parses a Kineto trace (already decompressed); `file` names it in sources and errors.
/// Remarks (kernels without shapes, activities outside steps) go to `notes`. Throws
/// CalibrationError "file:line:column: malformed JSON (byte N)" on bad JSON and ConfigError
/// naming file and JSON pointer on an event without a usable name, ts or dur.
TraceSummary parse_kineto(std::string_view text, const std::string& file,
                          std::vector<std::string>& notes);

}  // namespace loom::calibration
