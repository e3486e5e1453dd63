#pragma once
// Plain-text tables for the CLI's default output: right-aligned numbers, left-aligned text.
#include <string>
#include <vector>

namespace loom {

/// A table of strings rendered with aligned columns.
class Table {
 public:
  explicit Table(std::vector<std::string> headers);
  /// Adds a row; it must have as many cells as there are headers.
  void add_row(std::vector<std::string> cells);
  /// Left-aligns column `column` (columns are right-aligned by default, except the first).
  void align_left(size_t column);
  /// The table with a header rule, one line per row, trailing newline.
  std::string render() const;
  size_t rows() const { return rows_.size(); }

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
  std::vector<bool> left_;
};

}  // namespace loom
