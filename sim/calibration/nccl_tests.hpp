#pragma once
// The nccl-tests importer: reads the text that all_reduce_perf, all_gather_perf,
// reduce_scatter_perf, alltoall_perf, sendrecv_perf, broadcast_perf, reduce_perf,
// gather_perf and scatter_perf print (NVIDIA/nccl-tests src/util.cu: writeDeviceReport,
// writeResultHeader, writeBenchmarkLine*, writeResultFooter), as people paste it: with the
// command line, NCCL INFO lines interleaved, several runs in one file, a cut-off tail.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/calibration/profile.hpp"

namespace loom::calibration {

/// The longest line the nccl-tests importer reads, bytes: nccl-tests prints rows of about
/// 150 bytes and people's command lines run to a few KiB; a longer line is not a log.
inline constexpr size_t MAX_NCCL_TESTS_LINE_BYTES = size_t{1} << 20;

/// What the user states about the files (`loom calibrate import --op`).
struct ImportOptions {
  /// The collective of every table: overrides inference from the columns; a program name
  /// the log shows must agree with it.
  std::optional<sim::CollectiveOp> op;
};

/// What the files gave: collective tables, trace summaries and remarks worth showing
/// (skipped rows, a cut-off tail, kernels without shapes).
struct ImportResult {
  std::vector<CollectiveTable> tables;
  std::vector<TraceSummary> traces;
  std::vector<std::string> notes;
};

/// The collectives nccl-tests has a program for, by loom name ("all_reduce", "all_to_all", ...).
std::vector<std::string> nccl_tests_op_names();

/// Whether `text` is nccl-tests output (it has the results table's column header).
bool looks_like_nccl_tests(std::string_view text);

/// The nccl-tests program that measures `op` ("all_reduce_perf", "alltoall_perf", ...).
/// Throws InternalError for an op nccl-tests has no program for (barrier).
std::string nccl_tests_program(sim::CollectiveOp op);

/// Parses nccl-tests output; `file` names it in sources and errors. Lines may carry launcher
/// prefixes (srun " 0: ", mpirun "[1,0]<stdout>:", pdsh "host: "); command lines may be
/// continued with a backslash. The op comes from the last `<name>_perf[_mpi]` the text
/// mentions before each table, else `options.op`, else the table's columns (redop, root,
/// busbw/algbw against the group size; the note and `op_inferred_from` say how); the group
/// size from the "#  Rank" device lines of the communicator of rank 0, the node count from
/// their distinct hostnames; the NCCL_* environment from command lines, `export` lines and
/// NCCL's "set by environment" reports. Rows that break the size/time trend are flagged and
/// down-weighted (nccl_tests_fit.hpp). Throws CalibrationError "file:line: ..." on a malformed
/// row or device line, a line over MAX_NCCL_TESTS_LINE_BYTES, a table without device lines,
/// a table whose op neither the log nor the columns settle, `options.op` contradicting the
/// program, or no table at all. Time linear in the text's length.
ImportResult parse_nccl_tests(std::string_view text, const std::string& file,
                              const ImportOptions& options = {});

/// Reads each file and imports it by its content: nccl-tests output, or a PyTorch profiler
/// (Kineto) Chrome trace, plain or gzipped (calibration/kineto.hpp). Throws ConfigError for a
/// missing file and CalibrationError naming file and line for an unrecognised or malformed
/// one.
ImportResult import_files(const std::vector<std::string>& files, const ImportOptions& options = {});

}  // namespace loom::calibration
