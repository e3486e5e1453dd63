#pragma once
// Goodput: the wall time a training run takes once failures and checkpoints are counted.
// Failures arrive as a Poisson process at a rate per GPU-hour, so a job on n GPUs fails
// every M = 1 / (rate x n) hours on average (its MTBF). The job writes a checkpoint of its
// model state every tau seconds of training, each write taking delta = size / bandwidth;
// tau is Young's interval sqrt(2 delta M) (Young 1974; Daly 2006's first-order optimum). A
// failure costs the restart time R plus, on average, half an interval and half a write of
// lost work. With T the failure-free (ideal) time, the expected wall time W solves
//   W = T (1 + delta / tau) + (W / M) (R + (tau + delta) / 2)     (Daly 2006, first order)
// so W = T (1 + delta / tau) / (1 - (R + (tau + delta) / 2) / M). docs/plan.md derives the
// defaults below and gives their sources.

namespace loom::strategies {

/// Seconds in an hour and in a day: the units `loom plan` reports rates and durations in.
inline constexpr double SECONDS_PER_HOUR = 3600.0;
inline constexpr double SECONDS_PER_DAY = 24 * SECONDS_PER_HOUR;

/// Unexpected interruptions per GPU-hour from Llama 3's pre-training (Dubey et al. 2024,
/// "The Llama 3 Herd of Models", Sec. 3.3.4): 419 unexpected interruptions in a 54-day
/// snapshot on up to 16,384 H100 GPUs: 419 / (16,384 x 54 x 24 GPU-hours) = 1.97e-5 per
/// GPU-hour (one interruption every 3.1 hours at 16,384 GPUs). Counting every GPU for the
/// whole snapshot makes this a lower bound on the rate.
inline constexpr double LLAMA3_FAILURES_PER_GPU_HOUR = 419.0 / (16384.0 * 54.0 * 24.0);

/// Aggregate checkpoint write bandwidth, bytes per second: the sustained throughput of the
/// storage Llama 3 checkpointed to (Dubey et al. 2024, Sec. 3.3.1: Tectonic, 2 TB/s
/// sustained, 7 TB/s peak).
inline constexpr double DEFAULT_CHECKPOINT_WRITE_BPS = 2e12;

/// Seconds from a failure until training runs again (detection, rescheduling, process start,
/// checkpoint load): 10 minutes, the restart time of Daly 2006's worked examples. An
/// assumption, not a measurement: docs/plan.md says so.
inline constexpr double DEFAULT_RESTART_S = 600.0;

/// What the goodput model needs besides the run.
struct GoodputInputs {
  double failures_per_gpu_hour = LLAMA3_FAILURES_PER_GPU_HOUR;  ///< >= 0; 0: no failures
  double checkpoint_bytes = 0;                                  ///< model state written, bytes
  double checkpoint_write_Bps = DEFAULT_CHECKPOINT_WRITE_BPS;   ///< bytes per second, > 0
  double restart_s = DEFAULT_RESTART_S;                         ///< seconds, >= 0
};

/// The expected run with failures and checkpoints.
struct Goodput {
  double ideal_s = 0;                ///< failure-free training time, seconds
  double mtbf_s = 0;                 ///< the job's mean time between failures, seconds (inf: none)
  double checkpoint_write_s = 0;     ///< one checkpoint write, seconds
  double checkpoint_interval_s = 0;  ///< training seconds between checkpoints (inf: none)
  double expected_s = 0;             ///< expected wall time, seconds (inf: never finishes)
  double expected_failures = 0;      ///< failures expected during expected_s
  double goodput = 1;                ///< ideal_s / expected_s, in [0, 1]
  /// Whether the run finishes: a failure comes, on average, later than what it costs.
  bool finishes() const;
};

/// Young's checkpoint interval sqrt(2 x write_s x mtbf_s), seconds; infinite when mtbf_s is
/// infinite. Both arguments in seconds.
double young_daly_interval(double write_s, double mtbf_s);

/// The expected run of `ideal_s` failure-free seconds on `gpus` GPUs (see file comment).
/// Never throws: a run that cannot finish has expected_s infinite and goodput 0.
Goodput expected_run(double ideal_s, long long gpus, const GoodputInputs& inputs);

}  // namespace loom::strategies
