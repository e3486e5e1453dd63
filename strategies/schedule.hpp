#pragma once
// Pipeline schedules as data: for p stages, m micro-batches and v model chunks per stage,
// the ordered list of passes each stage runs. A pass is a forward F(mb, chunk), a backward
// B(mb, chunk), or — for zero-bubble — a backward split into its input-gradient part
// Bi(mb, chunk) and its weight-gradient part W(mb, chunk).
//
// Chunk c of stage s holds virtual stage c·p + s (Megatron's interleaved placement), so the
// forward of a micro-batch visits stages 0..p−1 for chunk 0, then 0..p−1 for chunk 1, ...
// Cross-stage dependencies: F(mb, vs) needs F(mb, vs−1); B(mb, vs) (or Bi) needs B/Bi(mb,
// vs+1); and on the same stage B needs F of the same (mb, vs), W needs Bi of it.
#include <cstdint>
#include <string>
#include <vector>

#include "models/training_plan.hpp"

namespace loom::strategies {

/// The kind of one pipeline pass.
enum class PassKind {
  FORWARD,          ///< forward of one micro-batch through one chunk
  BACKWARD,         ///< full backward (input and weight gradients together)
  BACKWARD_INPUT,   ///< zero-bubble: input-gradient part of the backward (on the critical path)
  BACKWARD_WEIGHT,  ///< zero-bubble: weight-gradient part (deferrable)
};

/// One pass in a stage's order.
struct Pass {
  PassKind kind = PassKind::FORWARD;
  int micro_batch = 0;  ///< 0..m−1
  int chunk = 0;        ///< model chunk on this stage, 0..v−1
  bool operator==(const Pass&) const = default;
};

/// Per-stage ordered passes of one training step.
struct PipelineSchedule {
  models::Schedule kind = models::Schedule::ONE_F_ONE_B;
  int stages = 1;                            ///< p
  int micro_batches = 1;                     ///< m
  int chunks = 1;                            ///< v (virtual stages per rank)
  std::vector<std::vector<Pass>> per_stage;  ///< per_stage[s]: the passes of stage s, in order

  /// Virtual stage of chunk `chunk` on stage `stage`: chunk·p + stage.
  int virtual_stage(int stage, int chunk) const { return chunk * stages + stage; }
};

/// Builds the schedule `kind` for p stages, m micro-batches and v chunks. Non-interleaved
/// schedules need v = 1; interleaved needs v ≥ 2 and m a multiple of p (Megatron's rule).
/// Throws ValidationError on "stages", "micro_batches" or "chunks" when the shape is invalid
/// (validate_plan reports the same rules on plan fields first).
/// The result has passed check_deadlock_free.
PipelineSchedule build_schedule(models::Schedule kind, int stages, int micro_batches, int chunks);

/// Walks the per-stage orders with the cross-stage dependencies (as if every pass took the
/// same time) and throws InternalError when some stage would wait forever, or when a pass is
/// missing or repeated.
void check_deadlock_free(const PipelineSchedule& schedule);

/// Most micro-batches whose forward activations a stage holds at once (F done, B/Bi not yet),
/// counting chunks of the same micro-batch separately divided by v; the activation multiplier
/// of the memory model for that stage.
double peak_in_flight(const PipelineSchedule& schedule, int stage);

/// "F", "B", "Bi" or "W".
std::string to_string(PassKind kind);

}  // namespace loom::strategies
