#pragma once
// GEMM shapes to measure: the standard grid, or a shapes file (`loom calibrate shapes`, or
// written by hand): one "m n k" per line, '#' comments and blank lines ignored; extra
// columns after k (a label, a count) are kept as the shape's note.
#include <cstdint>
#include <string>
#include <vector>

namespace loom::harness {

/// One GEMM: D[m,n] = A[m,k] * B[k,n].
struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0;
  std::string note;  ///< the rest of the shapes-file line ("" for the grid)
};

/// The standard grid: squares 256 .. 16384 and transformer-like shapes (tokens x hidden x
/// FFN of Llama-3-8B and -70B at 2048 and 8192 tokens).
std::vector<GemmShape> standard_shapes();

/// Parses shapes-file text; `file` names it in errors. Throws UsageError "file:line: ..." on
/// a line without three positive integers, or a file without shapes.
std::vector<GemmShape> parse_shapes(const std::string& text, const std::string& file);

/// Reads and parses a shapes file; throws UsageError when it cannot be read.
std::vector<GemmShape> read_shapes(const std::string& path);

}  // namespace loom::harness
