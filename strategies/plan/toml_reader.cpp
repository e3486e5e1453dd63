#include "strategies/plan/toml_reader.hpp"

#include <fmt/format.h>

#include <cctype>

#include "common/error.hpp"

namespace loom::strategies {
namespace {

constexpr size_t MAX_BYTES = 1 << 20;
constexpr size_t MAX_ENTRIES = 10'000;
constexpr int MAX_DEPTH = 8;  // nested arrays

bool bare_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
}

class Reader {
 public:
  Reader(const std::string& text, const std::string& origin) : s_(text), origin_(origin) {}

  TomlTable read() {
    if (s_.size() > MAX_BYTES) fail("the file is over 1 MiB");
    while (true) {
      skip_blank_lines();
      if (i_ >= s_.size()) break;
      if (s_[i_] == '[') {
        header();
      } else {
        entry();
      }
    }
    return out_;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw ConfigError(origin_, "", fmt::format("{}:{}: {}", origin_, line_, what));
  }

  // Spaces and tabs, and a comment to the end of the line.
  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t')) ++i_;
    if (i_ < s_.size() && s_[i_] == '#')
      while (i_ < s_.size() && s_[i_] != '\n') ++i_;
  }
  void skip_blank_lines() {
    while (true) {
      skip_space();
      if (i_ < s_.size() && (s_[i_] == '\n' || s_[i_] == '\r')) {
        if (s_[i_] == '\n') ++line_;
        ++i_;
        continue;
      }
      return;
    }
  }
  void end_of_line() {
    skip_space();
    if (i_ < s_.size() && s_[i_] == '\r') ++i_;
    if (i_ < s_.size() && s_[i_] != '\n')
      fail(fmt::format("unexpected '{}' after the value", s_[i_]));
  }

  std::string key() {
    std::string k;
    while (true) {
      skip_space();
      const size_t start = i_;
      if (i_ < s_.size() && s_[i_] == '"') {
        k += basic_string();
      } else {
        while (i_ < s_.size() && bare_char(s_[i_])) ++i_;
        if (i_ == start) fail("a key expected");
        k += s_.substr(start, i_ - start);
      }
      skip_space();
      if (i_ < s_.size() && s_[i_] == '.') {
        ++i_;
        k += '.';
        continue;
      }
      return k;
    }
  }

  void header() {
    ++i_;
    if (i_ < s_.size() && s_[i_] == '[') fail("arrays of tables ([[...]]) are not read");
    table_ = key();
    if (i_ >= s_.size() || s_[i_] != ']') fail("']' expected after the table name");
    ++i_;
    end_of_line();
  }

  void entry() {
    const std::string k = key();
    if (i_ >= s_.size() || s_[i_] != '=') fail(fmt::format("'=' expected after '{}'", k));
    ++i_;
    skip_space();
    TomlValue v = value(0);
    end_of_line();
    const std::string full = table_.empty() ? k : table_ + "." + k;
    if (out_.count(full)) fail(fmt::format("'{}' given twice", full));
    if (out_.size() >= MAX_ENTRIES) fail("more than 10,000 entries");
    out_.emplace(full, std::move(v));
  }

  std::string basic_string() {
    ++i_;  // the opening quote
    std::string out;
    while (i_ < s_.size() && s_[i_] != '"') {
      if (s_[i_] == '\n') fail("a string ends at the end of its line");
      if (s_[i_] == '\\') {
        if (++i_ >= s_.size()) break;
        const char c = s_[i_];
        out += c == 'n' ? '\n' : c == 't' ? '\t' : c;
        if (c != 'n' && c != 't' && c != '"' && c != '\\')
          fail(fmt::format("escape \\{} is not read", c));
      } else {
        out += s_[i_];
      }
      ++i_;
    }
    if (i_ >= s_.size()) fail("a string without its closing quote");
    ++i_;
    return out;
  }

  TomlValue value(int depth) {
    TomlValue v;
    v.line = line_;
    if (i_ >= s_.size() || s_[i_] == '\n') fail("a value expected");
    const char c = s_[i_];
    if (c == '"') {
      if (s_.compare(i_, 3, "\"\"\"") == 0) fail("multi-line strings are not read");
      v.value = basic_string();
    } else if (c == '\'') {
      const size_t end = s_.find_first_of("'\n", i_ + 1);
      if (end == std::string::npos || s_[end] != '\'') fail("a string without its closing quote");
      v.value = s_.substr(i_ + 1, end - i_ - 1);
      i_ = end + 1;
    } else if (c == '[') {
      v.value = array(depth);
    } else if (c == '{') {
      fail("inline tables are not read");
    } else {
      v.value = scalar();
    }
    return v;
  }

  std::vector<TomlValue> array(int depth) {
    if (depth >= MAX_DEPTH) fail("arrays nested more than 8 deep");
    ++i_;
    std::vector<TomlValue> items;
    while (true) {
      skip_blank_lines();
      if (i_ >= s_.size()) fail("an array without its closing ']'");
      if (s_[i_] == ']') {
        ++i_;
        return items;
      }
      items.push_back(value(depth + 1));
      if (items.size() > MAX_ENTRIES) fail("an array of more than 10,000 values");
      skip_blank_lines();
      if (i_ < s_.size() && s_[i_] == ',') {
        ++i_;
      } else if (i_ < s_.size() && s_[i_] != ']') {
        fail("',' or ']' expected in the array");
      }
    }
  }

  std::variant<std::string, std::int64_t, double, bool, std::vector<TomlValue>> scalar() {
    const size_t start = i_;
    while (i_ < s_.size() && !std::isspace(static_cast<unsigned char>(s_[i_])) && s_[i_] != ',' &&
           s_[i_] != ']' && s_[i_] != '#')
      ++i_;
    const std::string word = s_.substr(start, i_ - start);
    if (word == "true") return true;
    if (word == "false") return false;
    std::string digits;
    for (char ch : word)
      if (ch != '_') digits += ch;
    const bool is_float =
        digits.find_first_of(".eE") != std::string::npos || digits == "inf" || digits == "nan";
    try {
      size_t used = 0;
      if (is_float) {
        const double x = std::stod(digits, &used);
        if (used == digits.size() && !digits.empty()) return x;
      } else {
        const long long n = std::stoll(digits, &used, 10);
        if (used == digits.size() && !digits.empty()) return static_cast<std::int64_t>(n);
      }
    } catch (const std::exception&) {
    }
    fail(fmt::format("'{}' is not a string, number, boolean or array", word));
  }

  const std::string& s_;
  const std::string& origin_;
  size_t i_ = 0;
  int line_ = 1;
  std::string table_;
  TomlTable out_;
};

}  // namespace

TomlTable parse_toml(const std::string& text, const std::string& origin) {
  return Reader(text, origin).read();
}

std::string toml_text(const TomlValue& v) {
  if (const auto* s = std::get_if<std::string>(&v.value)) return '"' + *s + '"';
  if (const auto* n = std::get_if<std::int64_t>(&v.value)) return std::to_string(*n);
  if (const auto* x = std::get_if<double>(&v.value)) return fmt::format("{}", *x);
  if (const auto* b = std::get_if<bool>(&v.value)) return *b ? "true" : "false";
  return "[...]";
}

}  // namespace loom::strategies
