#include "sim/calibration/nccl_tests_text.hpp"

#include <cctype>
#include <cmath>
#include <cstdlib>

namespace loom::calibration::nccl_text {

namespace {

bool is_space(char c) {
  return std::isspace(static_cast<unsigned char>(c)) != 0;
}
bool is_digit(char c) {
  return std::isdigit(static_cast<unsigned char>(c)) != 0;
}
bool is_alnum(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0;
}

bool is_name_char(char c) {
  return std::islower(static_cast<unsigned char>(c)) || is_digit(c) || c == '_';
}

// "[1,0]<stdout>:" / "[1,0]<stderr>:" (Open MPI --tag-output): the length, else 0.
size_t tag_output_prefix(std::string_view line) {
  size_t i = 0;
  if (i >= line.size() || line[i] != '[') return 0;
  ++i;
  const auto digits = [&] {
    const size_t from = i;
    while (i < line.size() && is_digit(line[i])) ++i;
    return i > from;
  };
  if (!digits() || i >= line.size() || line[i] != ',') return 0;
  ++i;
  if (!digits() || i >= line.size() || line[i] != ']') return 0;
  ++i;
  for (std::string_view tag : {"<stdout>:", "<stderr>:"}) {
    if (line.substr(i, tag.size()) == tag) return i + tag.size();
  }
  return 0;
}

// "host: " (pdsh) or "  0: " (srun --label): a word of host-name characters right after
// optional blanks (blanks only before task numbers), then ':' and a blank or the end.
size_t label_prefix(std::string_view line) {
  size_t i = 0;
  while (i < line.size() && line[i] == ' ') ++i;
  const size_t word = i;
  bool digits_only = true;
  while (i < line.size() &&
         (is_alnum(line[i]) || line[i] == '.' || line[i] == '-' || line[i] == '_')) {
    digits_only = digits_only && is_digit(line[i]);
    ++i;
  }
  if (i == word || i >= line.size() || line[i] != ':') return 0;
  if (word > 0 && !digits_only) return 0;  // indented prose ("  Local host: x"), not a label
  if (!is_alnum(line[word])) return 0;
  if (i + 1 < line.size() && line[i + 1] != ' ') return 0;
  return i + 1;
}

}  // namespace

std::string_view strip_launcher_prefix(std::string_view line) {
  for (int depth = 0; depth < 3; ++depth) {
    size_t cut = tag_output_prefix(line);
    if (cut == 0) cut = label_prefix(line);
    if (cut == 0) break;
    line.remove_prefix(cut);
    if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
  }
  return line;
}

void split_tokens(std::string_view line, std::vector<std::string_view>& out) {
  out.clear();
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && is_space(line[i])) ++i;
    size_t j = i;
    while (j < line.size() && !is_space(line[j])) ++j;
    if (j > i) out.push_back(line.substr(i, j - i));
    i = j;
  }
}

std::optional<std::string> program_in(std::string_view line) {
  std::optional<std::string> found;
  for (size_t at = line.find("_perf"); at != std::string_view::npos;
       at = line.find("_perf", at + 1)) {
    size_t end = at + 5;
    if (line.substr(end, 4) == "_mpi") end += 4;
    if (end < line.size() && is_name_char(line[end])) continue;
    size_t begin = at;
    while (begin > 0 && is_name_char(line[begin - 1])) --begin;
    if (begin < at) found = std::string(line.substr(begin, end - begin));
  }
  return found;
}

std::string_view program_base(std::string_view name) {
  constexpr std::string_view MPI = "_mpi";
  if (name.size() > MPI.size() && name.substr(name.size() - MPI.size()) == MPI)
    name.remove_suffix(MPI.size());
  return name;
}

namespace {

std::string unquoted(std::string_view v) {
  if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front())
    v = v.substr(1, v.size() - 2);
  return std::string(v);
}

bool is_nccl_name(std::string_view name) {
  if (name.size() <= 5 || name.substr(0, 5) != "NCCL_") return false;
  for (char c : name)
    if (!(std::isupper(static_cast<unsigned char>(c)) || is_digit(c) || c == '_')) return false;
  return true;
}

bool assignment(std::string_view piece, std::map<std::string, std::string>& env) {
  const size_t eq = piece.find('=');
  if (eq == std::string_view::npos || !is_nccl_name(piece.substr(0, eq))) return false;
  env[std::string(piece.substr(0, eq))] = unquoted(piece.substr(eq + 1));
  return true;
}

}  // namespace

bool env_in(const std::vector<std::string_view>& tokens, std::map<std::string, std::string>& env) {
  bool found = false;
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::string_view t = tokens[i];
    if ((t == "-genv" || t == "-env") && i + 2 < tokens.size() && is_nccl_name(tokens[i + 1])) {
      env[std::string(tokens[i + 1])] = unquoted(tokens[i + 2]);
      found = true;
      i += 2;
      continue;
    }
    if (t.substr(0, 9) != "--export=") {
      found = assignment(t, env) || found;  // values may hold commas (NCCL_IB_HCA)
      continue;
    }
    t.remove_prefix(9);
    size_t begin = 0;
    while (begin <= t.size()) {  // srun's list: ALL,NCCL_ALGO=Ring,NCCL_PROTO=Simple
      size_t end = t.find(',', begin);
      if (end == std::string_view::npos) end = t.size();
      found = assignment(t.substr(begin, end - begin), env) || found;
      begin = end + 1;
    }
  }
  return found;
}

std::optional<std::pair<std::string, std::string>> env_reported(std::string_view line) {
  constexpr std::string_view SET = " set by environment to ";
  const size_t at = line.find(SET);
  if (at == std::string_view::npos) return std::nullopt;
  size_t begin = at;
  while (begin > 0 && !is_space(line[begin - 1])) --begin;
  const std::string_view name = line.substr(begin, at - begin);
  if (!is_nccl_name(name)) return std::nullopt;
  std::string_view value = line.substr(at + SET.size());
  while (!value.empty() && (is_space(value.back()) || value.back() == '.')) value.remove_suffix(1);
  if (value.empty()) return std::nullopt;
  return std::make_pair(std::string(name), std::string(value));
}

std::optional<double> half_unit(std::string_view token) {
  if (token.find_first_of("eE") != std::string_view::npos) return std::nullopt;
  const size_t dot = token.find('.');
  const size_t decimals = dot == std::string_view::npos ? 0 : token.size() - dot - 1;
  return 0.5 * std::pow(10.0, -static_cast<double>(decimals));
}

std::optional<double> number_of(std::string_view token) {
  const std::string text(token);
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value))
    return std::nullopt;
  return value;
}

}  // namespace loom::calibration::nccl_text
