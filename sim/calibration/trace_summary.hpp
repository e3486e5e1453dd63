#pragma once
// What a profiler trace of a real training run measured, per kernel class: the profile's
// `trace_summaries` section (docs/calibration.md). One TraceSummary per imported trace (one
// rank of one run): per-step kernel time by class, GEMM calls with their shapes and achieved
// FLOP/s, collectives with their sizes and bus bandwidth, copies with their bandwidth.
// Plain data; the importer is calibration/kineto.hpp.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/collectives.hpp"

namespace loom::calibration {

/// The kernel classes a trace is summarised by, in display order: "gemm", "attention",
/// "normalization", "elementwise", "nccl:<op>" per collective (loom op names, "nccl:unknown"
/// when neither name nor arguments say which), "memcpy", "memset", "other".
const std::vector<std::string>& kernel_class_names();
/// Whether `name` is one of kernel_class_names().
bool is_kernel_class(std::string_view name);
/// The position of a class in display order (unknown names last).
int kernel_class_rank(std::string_view name);

/// Kernels of one class in one step.
struct ClassTime {
  std::string name;    ///< a kernel class name
  int kernels = 0;     ///< device activities of the class launched in the step
  double seconds = 0;  ///< their summed duration (overlapping streams both count), seconds
};

/// A class's mean over the steps of a trace.
struct ClassMean {
  std::string name;
  double kernels = 0;  ///< device activities per step
  double seconds = 0;  ///< summed duration per step, seconds
};

/// One training step: a `ProfilerStep#N` annotation and the device work it launched.
struct TraceStep {
  std::string name;                ///< "ProfilerStep#N"
  double wall_seconds = 0;         ///< the CPU annotation's duration, seconds
  double busy_seconds = 0;         ///< union of its device activities' intervals, seconds
  std::vector<ClassTime> classes;  ///< present classes only, in display order
};

/// One GEMM shape as the trace records it (record_shapes): calls of the same CPU op, dtype
/// and shape, with the GEMM kernel time each call launched.
struct GemmFigure {
  std::string op;     ///< the CPU op whose "Input Dims" gave the shape ("aten::mm")
  std::string dtype;  ///< "bf16", "fp16", "fp32", "fp8", ...
  std::int64_t batch = 1, m = 0, n = 0, k = 0;
  int calls = 0;
  double seconds = 0;  ///< summed GEMM kernel time of all calls, seconds
  /// FLOPs of one call: 2 * batch * m * n * k.
  double flops() const { return 2.0 * batch * m * n * k; }
  /// Achieved rate, FLOP/s.
  double flops_per_second() const { return seconds > 0 ? flops() * calls / seconds : 0; }
};

/// One collective size: NCCL kernels of the same op, group size, dtype and message size.
struct CollectiveFigure {
  sim::CollectiveOp op = sim::CollectiveOp::ALL_REDUCE;
  int group_size = 0;
  std::string dtype;
  double bytes = 0;  ///< nccl-tests "size": max(in, out) elements x element bytes, bytes
  int calls = 0;
  double seconds = 0;  ///< summed kernel time of all calls, seconds
  /// Bus bandwidth (nccl-tests busbw), bytes/s.
  double bus_bytes_per_second() const;
};

/// Copies (or sets) of one kind: "HtoD", "DtoH", "DtoD", "PtoP", "memset", ...
struct CopyFigure {
  std::string kind;
  int calls = 0;
  double bytes = 0;    ///< total bytes moved, bytes
  double seconds = 0;  ///< total time, seconds
  /// Achieved bandwidth, bytes/s.
  double bytes_per_second() const { return seconds > 0 ? bytes / seconds : 0; }
};

/// One imported trace.
struct TraceSummary {
  std::string source;  ///< the file it came from
  std::string format;  ///< "kineto"
  std::string gpu;     ///< deviceProperties name of the traced device ("" if absent)
  int rank = -1;       ///< distributedInfo rank (-1 if absent)
  int world_size = 0;  ///< distributedInfo world_size (0 if absent)
  std::vector<TraceStep> steps;
  std::vector<GemmFigure> gemms;              ///< sorted by (op, dtype, batch, m, n, k)
  std::vector<CollectiveFigure> collectives;  ///< sorted by (op, group size, dtype, bytes)
  std::vector<CopyFigure> copies;             ///< sorted by kind
  int activities_outside_steps = 0;           ///< device activities launched outside every step
  /// Mean kernels and time per step of each present class, in display order; empty without
  /// steps.
  std::vector<ClassMean> per_step() const;
};

}  // namespace loom::calibration
