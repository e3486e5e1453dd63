#pragma once
// Causal sliding-window attention arithmetic shared by the FLOP counts (models/flops.cpp)
// and the fused-kernel shape law (topologies/kernel_coefficients.cpp).

namespace loom {

/// Whether a causal window of `window` keys over `seq` tokens skips any (0 < window < seq).
inline bool windowed(double seq, double window) {
  return window > 0 && window < seq;
}

/// Keys per query row of a causal attention over `seq` tokens in the full-square convention
/// (a causal kernel computes half of the counted square): `seq`, or under a sliding window of
/// w keys 2 w - w (w - 1) / seq, since its rows compute sum over i of min(i + 1, w) =
/// w seq - w (w - 1) / 2 scores per head.
inline double windowed_causal_keys(double seq, double window) {
  if (!windowed(seq, window)) return seq;
  return 2 * window - window * (window - 1) / seq;
}

}  // namespace loom
