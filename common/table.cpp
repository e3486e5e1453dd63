#include "common/table.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace loom {

Table::Table(std::vector<std::string> headers)
    : headers_(std::move(headers)), left_(headers_.size(), false) {
  if (!left_.empty()) left_[0] = true;
}

void Table::add_row(std::vector<std::string> cells) {
  check_invariant(cells.size() == headers_.size(), "table row width matches its header");
  rows_.push_back(std::move(cells));
}

void Table::align_left(size_t column) {
  if (column < left_.size()) left_[column] = true;
}

std::string Table::render() const {
  std::vector<size_t> width(headers_.size());
  for (size_t c = 0; c < headers_.size(); ++c) width[c] = headers_[c].size();
  for (const auto& row : rows_)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t c = 0; c < cells.size(); ++c) {
      if (c) out += "  ";
      std::string pad(width[c] - cells[c].size(), ' ');
      out += left_[c] ? cells[c] + pad : pad + cells[c];
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line(headers_);
  size_t total = 0;
  for (size_t c = 0; c < width.size(); ++c) total += width[c] + (c ? 2 : 0);
  out += std::string(total, '-') + "\n";
  for (const auto& row : rows_) out += line(row);
  return out;
}

}  // namespace loom
