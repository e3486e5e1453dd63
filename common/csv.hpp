#pragma once
// CSV output (`--format csv`): a header row, then one row per record; fields quoted as RFC
// 4180 says (a field holding a comma, a double quote, CR or LF is enclosed in double quotes,
// its quotes doubled); lines end in LF. Numbers are written in full precision, in base units.
#include <string>
#include <string_view>
#include <vector>

namespace loom {

/// A CSV document: one header row and records of the same width.
class CsvTable {
 public:
  explicit CsvTable(std::vector<std::string> header);
  /// Adds a record; throws InternalError when it has not as many fields as the header.
  void add_row(std::vector<std::string> fields);
  /// The header and every record, one line each, LF-terminated.
  std::string render() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

/// `text` as one CSV field: as is, or quoted (RFC 4180) when it holds , " CR or LF.
std::string csv_field(std::string_view text);

/// `value` in the shortest form that reads back to the same double ("0.05", "1e+20"); "nan"
/// and "inf" for non-finite values.
std::string csv_number(double value);

}  // namespace loom
