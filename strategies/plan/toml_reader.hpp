#pragma once
// The subset of TOML a torchtitan job config uses: [table] and [dotted.table] headers,
// `key = value` with basic "strings" and 'literal strings', integers, floats, booleans and
// arrays of those (across lines too), '#' comments. Bounded input; every error names the file
// and line. Not a general TOML reader: arrays of tables, inline tables and dates are refused.
#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace loom::strategies {

/// One TOML value and the line it was on.
struct TomlValue {
  std::variant<std::string, std::int64_t, double, bool, std::vector<TomlValue>> value;
  int line = 0;
};

/// Every key of a document by its full dotted name ("parallelism.tensor_parallel_degree"), in
/// name order.
using TomlTable = std::map<std::string, TomlValue, std::less<>>;

/// Reads `text` (named `origin` in errors). Throws ConfigError "ORIGIN:LINE: ..." for what
/// the subset does not hold, a key given twice, or input over the bounds (1 MiB, 10,000
/// entries).
TomlTable parse_toml(const std::string& text, const std::string& origin);

/// How a value reads in a message: "8", "\"1F1B\"", "true", "[...]".
std::string toml_text(const TomlValue& v);

}  // namespace loom::strategies
