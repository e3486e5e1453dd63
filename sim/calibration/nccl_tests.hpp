#pragma once
// The nccl-tests importer: reads the text that all_reduce_perf, all_gather_perf,
// reduce_scatter_perf, alltoall_perf, sendrecv_perf, broadcast_perf, reduce_perf,
// gather_perf and scatter_perf print (NVIDIA/nccl-tests src/util.cu: writeDeviceReport,
// writeResultHeader, writeBenchmarkLine*, writeResultFooter), as people paste it: with the
// command line, NCCL INFO lines interleaved, several runs in one file, a cut-off tail.
#include <string>
#include <string_view>
#include <vector>

#include "sim/calibration/profile.hpp"

namespace loom::calibration {

/// What the files gave: collective tables, trace summaries and remarks worth showing
/// (skipped rows, a cut-off tail, kernels without shapes).
struct ImportResult {
  std::vector<CollectiveTable> tables;
  std::vector<TraceSummary> traces;
  std::vector<std::string> notes;
};

/// Whether `text` is nccl-tests output (it has the results table's column header).
bool looks_like_nccl_tests(std::string_view text);

/// The nccl-tests program that measures `op` ("all_reduce_perf", "alltoall_perf", ...).
/// Throws InternalError for an op nccl-tests has no program for (barrier).
std::string nccl_tests_program(sim::CollectiveOp op);

/// Parses nccl-tests output; `file` names it in sources and errors. The op comes from the
/// last `<name>_perf` the text mentions before each table (else from the file name); the
/// group size from the "#  Rank" device lines of the communicator of rank 0, the node count
/// from their distinct hostnames. Throws CalibrationError "file:line: ..." on a malformed
/// row or device line, a table without device lines or program name, or no table at all.
ImportResult parse_nccl_tests(std::string_view text, const std::string& file);

/// Reads each file and imports it by its content: nccl-tests output, or a PyTorch profiler
/// (Kineto) Chrome trace, plain or gzipped (calibration/kineto.hpp). Throws ConfigError for a
/// missing file and CalibrationError naming file and line for an unrecognised or malformed
/// one.
ImportResult import_files(const std::vector<std::string>& files);

}  // namespace loom::calibration
