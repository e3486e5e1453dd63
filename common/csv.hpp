#pragma once
// CSV output (`--format csv`): a header row, then one row per record; fields quoted as RFC
// 4180 says (a field holding a comma, a double quote, CR or LF is enclosed in double quotes,
// its quotes doubled); lines end in LF. Numbers are written in full precision, in base units;
// booleans as `true`/`false`. Every table's first column is `schema`, holding
// "loom.<command>.v<N>" on every record (README.md: a column rather than a `#` comment line,
// because every CSV reader loads a column and many stop at, or mis-parse, a comment line).
#include <string>
#include <string_view>
#include <vector>

namespace loom {

/// A CSV document: one header row and records of the same width, the first column `schema`.
class CsvTable {
 public:
  /// `command` ("simulate") and `version` fill the `schema` column ("loom.simulate.v1"), which
  /// precedes `header`. Bump the version when a column changes meaning or goes away.
  CsvTable(std::string_view command, int version, std::vector<std::string> header);
  /// Adds a record; throws InternalError when it has not as many fields as the header.
  void add_row(std::vector<std::string> fields);
  /// The header and every record, one line each, LF-terminated.
  std::string render() const;

 private:
  std::string schema_;
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

/// `text` as one CSV field: as is, or quoted (RFC 4180) when it holds , " CR or LF.
std::string csv_field(std::string_view text);

/// `value` as a CSV boolean: "true" or "false".
std::string csv_bool(bool value);

/// `value` in the shortest form that reads back to the same double ("0.05", "1e+20"); "nan"
/// and "inf" for non-finite values.
std::string csv_number(double value);

}  // namespace loom
