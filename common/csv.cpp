#include "common/csv.hpp"

#include <fmt/format.h>

#include "common/error.hpp"

namespace loom {

CsvTable::CsvTable(std::string_view command, int version, std::vector<std::string> header)
    : schema_(fmt::format("loom.{}.v{}", command, version)), header_(std::move(header)) {
  header_.insert(header_.begin(), "schema");
}

void CsvTable::add_row(std::vector<std::string> fields) {
  check_invariant(fields.size() + 1 == header_.size(), "a CSV record as wide as its header");
  fields.insert(fields.begin(), schema_);
  rows_.push_back(std::move(fields));
}

std::string CsvTable::render() const {
  std::string out;
  auto line = [&out](const std::vector<std::string>& fields) {
    for (size_t i = 0; i < fields.size(); ++i) {
      if (i) out += ',';
      out += csv_field(fields[i]);
    }
    out += '\n';
  };
  line(header_);
  for (const auto& row : rows_) line(row);
  return out;
}

std::string csv_field(std::string_view text) {
  if (text.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

std::string csv_bool(bool value) {
  return value ? "true" : "false";
}

std::string csv_number(double value) {
  return fmt::format("{}", value);
}

}  // namespace loom
