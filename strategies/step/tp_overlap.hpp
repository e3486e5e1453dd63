#pragma once
// TP communication overlap (--tp-comm-overlap) as each implementation pipelines it: which
// GEMM a tensor-parallel collective overlaps, in how many chunks, and the seconds it leaves
// exposed; the same for a context-parallel ring beside its attention blocks. The step simulator
// (lower_passes) and the fast tier (fast_estimate) both charge tp_overlap_exposed_s, so they agree
// by construction. docs/simulate.md derives the closed forms; docs/defaults.md cites the constants.
#include <functional>
#include <utility>
#include <vector>

#include "models/flops.hpp"
#include "models/training_plan.hpp"
#include "sim/collectives.hpp"

namespace loom::strategies {

/// How a TP collective overlaps its GEMM.
enum class TpOverlapMethod {
  NONE,      ///< not overlapped: the whole collective stays exposed
  RING,      ///< ring of n = tp chunks, one chunk's GEMM per exchange step
  PIPELINE,  ///< GEMM split in n chunks, each chunk's collective after it (TE "pipeline")
  BULK,      ///< the whole collective beside an independent GEMM (TE "bulk")
};

/// One TP collective's overlap: its method and the GEMM it pipelines with.
struct TpOverlap {
  TpOverlapMethod method = TpOverlapMethod::NONE;
  int chunks = 1;  ///< n: chunks the GEMM and the collective are split into
  /// The GEMM as the pass already counts it (whole, unchunked), seconds; for BULK the
  /// independent GEMM that runs beside the collective.
  double gemm_s = 0;
  /// One chunk of the GEMM at its own (smaller) shape, seconds: >= gemm_s / chunks.
  double chunk_gemm_s = 0;
  /// SMs the implementation's communication kernels reserve from the GEMM (TE's num_sm with
  /// set_sm_margin); 0 where copy engines move the data.
  int comm_sms = 0;
  /// Compute streams the chunk GEMMs rotate over (TE: 3; async TP: 1): once the exchanges
  /// run ahead, that many chunks run at once and the chunks' rate approaches the whole
  /// GEMM's.
  int streams = 1;
};

/// The overlaps of one op's TP collective: after it in the forward (and recompute), and its
/// mirror in the backward.
struct TpOverlapPair {
  TpOverlap fwd, bwd;
};
/// Seconds of an op's passes as a pass counts them.
struct OpPassSeconds {
  double forward = 0, backward_input = 0, backward_weight = 0;
};
/// An op's pass seconds with its token dimension split in `chunks` (1: whole), per chunk.
using ChunkSeconds = std::function<OpPassSeconds(const models::OpCost& op, int chunks)>;

/// The overlap of each op's TP collective under `plan` (by op index; NONE where the plan has
/// no tp_comm_overlap, tp == 1, or no implementation overlaps that collective). Transformer
/// Engine's userbuffers (Megatron-LM, NeMo, no framework) and PyTorch's async TP
/// (torchtitan) pair the collectives with GEMMs differently (tp_overlap.cpp).
std::vector<TpOverlapPair> tp_overlaps(const std::vector<models::OpCost>& ops,
                                       const models::TrainingPlan& plan,
                                       const ChunkSeconds& seconds);

/// Whether `plan`'s context-parallel exchange runs beside its attention rather than before
/// it: a p2p ring (Transformer Engine, or PyTorch's context_parallel of torchtitan, whose
/// all-gather rotation also waits for its gather only after the local chunk's attention);
/// an all-to-all or Transformer Engine's all-gather blocks.
bool cp_overlapped(const models::TrainingPlan& plan);

/// Seconds of `o`'s collective left exposed on the compute stream beyond the GEMM seconds
/// the pass already counts, for a collective of `comm_s` seconds on an idle network whose
/// chunk moves 1 / (n - 1) (RING: one step of a ring) or 1 / n (PIPELINE) of it, on a
/// GPU of `sm_count` SMs. Closed forms (g: one chunk's GEMM alone, under the SM margin m;
/// e = max(m G / n, g / streams): a later chunk's GEMM with `streams` of them at once; c: one
/// chunk's comm; G: gemm_s):
///   NONE:      comm_s
///   RING:      c = comm_s / (n - 1);  g + (n - 1) max(c, e) - G
///   PIPELINE:  c = comm_s / n;  g + (n - 1) max(c, e) + c - G
///   BULK:      max(comm_s, m G) - G
/// The comm hidden is then at most (n - 1) min(c, e) (RING).
double tp_overlap_exposed_s(const TpOverlap& o, double comm_s, int sm_count);

}  // namespace loom::strategies
