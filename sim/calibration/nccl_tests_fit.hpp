#pragma once
// What a pasted nccl-tests table says about itself beyond its numbers
// (calibration/nccl_tests.hpp): which collective printed it when the log names no program,
// and which rows break the size/time trend.
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/calibration/profile.hpp"

namespace loom::calibration::nccl_fit {

/// The factor of `op` as a formula in n ("2(n-1)/n", "(n-1)/n", "1").
std::string_view bus_factor_formula(sim::CollectiveOp op);

/// The range of busbw/algbw that every row's printed (rounded) figures allow.
struct RatioBounds {
  double low = 0;
  double high = std::numeric_limits<double>::infinity();
  int rows = 0;  ///< rows that narrowed it (algbw printed above its rounding)
  /// Narrows the range by one row's algbw and busbw tokens; ignores unreadable ones.
  void add(std::string_view algbw, std::string_view busbw);
};

/// The columns of a table that tell collectives apart.
struct Signature {
  std::string redop;        ///< "sum", "none", ... (empty: no redop column)
  std::optional<int> root;  ///< -1: none (nullopt: no root column)
  RatioBounds ratio;
  int group_size = 0;
};

/// The collectives nccl-tests prints such a table for: redop "none" for all_gather, alltoall,
/// broadcast, gather, scatter; a root >= 0 for broadcast, reduce, gather, scatter; and a
/// busbw/algbw factor within `ratio`. In loom's op order.
std::vector<sim::CollectiveOp> candidates(const Signature& signature);

/// "busbw/algbw 1.875 = 2(n-1)/n with n=16, redop sum, root -1" for `op`.
std::string evidence(const Signature& signature, sim::CollectiveOp op);

/// Finds the times that break their table's size/time trend: in each series (out-of-place,
/// in-place) apart, in (log size, log time), a time outside the band that the lines through
/// its sound neighbours predict by more than the band's width (the neighbours' spread) and
/// more than three times the log's noise (the scaled median |log(out-of-place / in-place)|).
/// Flags them, sets each point's weight and time from its sound series, and adds a note
/// naming each flagged row. Linear in the table's size.
void mark_outliers(CollectiveTable& table, std::vector<std::string>& notes);

}  // namespace loom::calibration::nccl_fit
