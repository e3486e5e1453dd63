#pragma once
// Line-level reading of pasted nccl-tests logs (calibration/nccl_tests.hpp): launcher prefixes,
// tokens, the program name and the NCCL_* environment a command line shows. No allocation per
// line beyond the caller's reused buffers, so a log is read in time linear in its size.
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loom::calibration::nccl_text {

/// `line` without the labels launchers put before every line of a task's output: srun
/// `--label` (" 0: "), Open MPI `--tag-output` ("[1,0]<stdout>:") and pdsh ("host: "), any
/// of them nested.
std::string_view strip_launcher_prefix(std::string_view line);

/// Splits `line` at whitespace into `out` (cleared first; its capacity is reused).
void split_tokens(std::string_view line, std::vector<std::string_view>& out);

/// The last nccl-tests program named in `line`: "<name>_perf" or "<name>_perf_mpi" (a command
/// line, "# Collective test starting: ...", a path such as build/all_reduce_perf_mpi).
std::optional<std::string> program_in(std::string_view line);

/// `name` without the "_mpi" suffix of MPI builds ("all_reduce_perf_mpi" -> "all_reduce_perf").
std::string_view program_base(std::string_view name);

/// Adds the NCCL_* variables `tokens` set to `env`: `NCCL_X=V` (alone, after `export`, after
/// mpirun's `-x`, inside srun's `--export=ALL,NCCL_X=V`) and `-genv`/`-env NCCL_X V` (MPICH,
/// Intel MPI). Returns whether it found any.
bool env_in(const std::vector<std::string_view>& tokens, std::map<std::string, std::string>& env);

/// The variable and value of NCCL's own report "NCCL INFO NCCL_X set by environment to V".
std::optional<std::pair<std::string, std::string>> env_reported(std::string_view line);

/// `token` as a finite number (strtod over the whole token), else nullopt.
std::optional<double> number_of(std::string_view token);

/// Half a unit in the last printed digit of a decimal number ("12.34" -> 0.005), 0.5 for a
/// whole number; nullopt for exponent notation.
std::optional<double> half_unit(std::string_view token);

}  // namespace loom::calibration::nccl_text
