#include "sim/calibration/nccl_tests.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "common/strings.hpp"
#include "sim/calibration/gzip.hpp"
#include "sim/calibration/kineto.hpp"

namespace loom::calibration {

namespace {

constexpr std::string_view ROW_LAYOUT =
    "size count type redop root time algbw busbw #wrong time algbw busbw #wrong";

// nccl-tests programs loom has a collective for; the others (alltoallv, hypercube, ...) are
// rejected by name.
const std::vector<std::pair<std::string, sim::CollectiveOp>>& programs() {
  static const std::vector<std::pair<std::string, sim::CollectiveOp>> table = {
      {"all_reduce_perf", sim::CollectiveOp::ALL_REDUCE},
      {"all_gather_perf", sim::CollectiveOp::ALL_GATHER},
      {"reduce_scatter_perf", sim::CollectiveOp::REDUCE_SCATTER},
      {"alltoall_perf", sim::CollectiveOp::ALL_TO_ALL},
      {"sendrecv_perf", sim::CollectiveOp::SEND_RECV},
      {"broadcast_perf", sim::CollectiveOp::BROADCAST},
      {"reduce_perf", sim::CollectiveOp::REDUCE},
      {"gather_perf", sim::CollectiveOp::GATHER},
      {"scatter_perf", sim::CollectiveOp::SCATTER},
  };
  return table;
}

std::vector<std::string_view> tokens_of(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    size_t j = i;
    while (j < line.size() && !std::isspace(static_cast<unsigned char>(line[j]))) ++j;
    if (j > i) out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

bool is_name_char(char c) {
  return std::islower(static_cast<unsigned char>(c)) ||
         std::isdigit(static_cast<unsigned char>(c)) || c == '_';
}

// The last "<name>_perf" word in a line (a command line, "# Collective test starting: ...",
// a path such as build/all_reduce_perf).
std::optional<std::string> program_in(std::string_view line) {
  std::optional<std::string> found;
  for (size_t at = line.find("_perf"); at != std::string_view::npos;
       at = line.find("_perf", at + 1)) {
    const size_t end = at + 5;
    if (end < line.size() && is_name_char(line[end])) continue;
    size_t begin = at;
    while (begin > 0 && is_name_char(line[begin - 1])) --begin;
    if (begin < at) found = std::string(line.substr(begin, end - begin));
  }
  return found;
}

std::optional<double> number_of(std::string_view token) {
  const std::string text(token);
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value))
    return std::nullopt;
  return value;
}

// `token` as a whole number from 0 to 2^30 (a rank or group index), else nullopt: checked as
// a double before it becomes an int.
std::optional<int> index_of(std::string_view token) {
  const auto value = number_of(token);
  if (!value || *value < 0 || *value > 0x1p30 || std::floor(*value) != *value) return std::nullopt;
  return static_cast<int>(*value);
}

// Reads one nccl-tests text, line by line (see parse_nccl_tests).
class Parser {
 public:
  explicit Parser(const std::string& file) : file_(file) {}

  void line(std::string_view text, int number);
  ImportResult finish(int last_line);

 private:
  struct Device {
    int rank = 0;
    int group = 0;
    std::string host;
    std::string name;
  };
  // Where the columns of a results row are, from the column header line.
  struct Columns {
    size_t count = 0;  // tokens a complete row has (timestamps may add more)
    size_t size = 0;
    size_t out_of_place = 0;  // "time" columns; in_place == 0: none
    size_t in_place = 0;
  };

  [[noreturn]] void fail(int number, const std::string& message) const {
    throw CalibrationError(fmt::format("{}:{}: {}", file_, number, message));
  }
  void device_line(const std::vector<std::string_view>& tokens, int number);
  void start_table(const std::vector<std::string_view>& tokens, int number);
  void row(const std::vector<std::string_view>& tokens, int number);
  void end_table();

  std::string file_;
  ImportResult result_;
  std::vector<Device> devices_;
  std::string program_;
  std::optional<CollectiveTable> table_;
  int table_line_ = 0;
  Columns columns_;
  int short_line_ = 0;  // a row cut short: fine only as the log's last row
};

void Parser::line(std::string_view text, int number) {
  if (text.find("NCCL INFO") != std::string_view::npos ||
      text.find("NCCL WARN") != std::string_view::npos) {
    return;  // NCCL_DEBUG chatter from any rank, anywhere in the log
  }
  if (auto program = program_in(text)) program_ = *program;
  const std::vector<std::string_view> tokens = tokens_of(text);
  if (tokens.empty()) return;
  if (tokens.front().front() == '#') {
    std::vector<std::string_view> rest = tokens;
    if (rest.front() == "#") {
      rest.erase(rest.begin());
    } else {
      rest.front().remove_prefix(1);
    }
    if (rest.empty()) return;
    const auto has = [&](std::string_view word) {
      return std::find(rest.begin(), rest.end(), word) != rest.end();
    };
    if (rest.front() == "nThread") {  // a new run: its own devices follow
      end_table();
      devices_.clear();
    } else if (rest.front() == "Rank") {
      device_line(rest, number);
    } else if (has("size") && has("busbw")) {
      start_table(rest, number);
    } else if (text.find("Out of bounds values") != std::string_view::npos ||
               text.find("Avg bus bandwidth") != std::string_view::npos) {
      end_table();
    }
    return;
  }
  if (table_ && std::isdigit(static_cast<unsigned char>(tokens.front().front())))
    row(tokens, number);
}

// "#  Rank  0 Group  0 Pid   6899 on host-a device  0 [0000:04:00] NVIDIA H100 80GB HBM3";
// older releases may print no "Group".
void Parser::device_line(const std::vector<std::string_view>& t, int number) {
  Device d;
  const auto value_after = [&](std::string_view key) -> std::optional<std::string_view> {
    for (size_t i = 0; i + 1 < t.size(); ++i)
      if (t[i] == key) return t[i + 1];
    return std::nullopt;
  };
  const auto rank = value_after("Rank");
  const auto host = value_after("on");
  const auto rank_value = rank ? index_of(*rank) : std::nullopt;
  if (!rank_value || !host) {
    fail(number,
         "malformed device line; expected '#  Rank N Group G Pid P on HOST device D "
         "[BUS] NAME' as nccl-tests prints it");
  }
  d.rank = *rank_value;
  if (const auto group = value_after("Group")) d.group = index_of(*group).value_or(0);
  d.host = std::string(*host);
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i].front() == '[' && t[i].back() == ']') {
      std::vector<std::string> words(t.begin() + static_cast<std::ptrdiff_t>(i) + 1, t.end());
      d.name = join(words, " ");
      break;
    }
  }
  devices_.push_back(std::move(d));
}

void Parser::start_table(const std::vector<std::string_view>& t, int number) {
  end_table();
  Columns c;
  std::vector<size_t> times;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == "timestamp") continue;
    if (t[i] == "size") c.size = i;
    if (t[i] == "time" || t[i] == "cputime") times.push_back(i);
    ++c.count;
  }
  if (times.empty()) fail(number, "results header without a 'time' column");
  c.out_of_place = times[0];
  c.in_place = times.size() > 1 ? times[1] : 0;
  const auto known = std::find_if(programs().begin(), programs().end(),
                                  [&](const auto& p) { return p.first == program_; });
  if (program_.empty()) {
    fail(number,
         "a nccl-tests table, but the log names no '<op>_perf' program before it; "
         "keep the command line or the '# Collective test starting' line in the file");
  }
  if (known == programs().end()) {
    std::vector<std::string> names;
    for (const auto& p : programs()) names.push_back(p.first);
    fail(number, fmt::format("nccl-tests program '{}' has no loom collective; loom imports {}",
                             program_, join(names, ", ")));
  }
  if (devices_.empty()) {
    fail(number,
         "a nccl-tests table without the '#  Rank ...' device lines before it; loom "
         "takes the group size and node count from them, so keep the header block");
  }
  CollectiveTable table;
  table.op = known->second;
  table.program = program_;
  table.source = file_;
  const auto lead =
      std::min_element(devices_.begin(), devices_.end(),
                       [](const Device& a, const Device& b) { return a.rank < b.rank; });
  std::set<std::string> hosts;
  for (const Device& d : devices_) {
    if (d.group != lead->group) continue;
    ++table.group_size;
    hosts.insert(d.host);
  }
  table.nodes = static_cast<int>(hosts.size());
  table.gpu = lead->name;
  table_ = std::move(table);
  table_line_ = number;
  columns_ = c;
}

void Parser::row(const std::vector<std::string_view>& t, int number) {
  if (short_line_ != 0) {
    fail(short_line_, fmt::format("results row cut short in the middle of the table; expected "
                                  "{} columns: {}",
                                  columns_.count, ROW_LAYOUT));
  }
  if (t.size() < columns_.count) {
    short_line_ = number;
    return;
  }
  const auto bytes = number_of(t[columns_.size]);
  if (!bytes || *bytes < 0 || *bytes > 0x1p53 || *bytes != std::floor(*bytes)) {
    fail(number, fmt::format("size '{}' is not a whole number of bytes up to 2^53; expected {}",
                             t[columns_.size], ROW_LAYOUT));
  }
  const auto time_at = [&](size_t column, const char* which) {
    const auto us = number_of(t[column]);
    if (!us || !(*us > 0)) {
      fail(number, fmt::format("{} time '{}' is not a positive number of microseconds; "
                               "expected {}",
                               which, t[column], ROW_LAYOUT));
    }
    const auto wrong = column + 3 < t.size() ? number_of(t[column + 3]) : std::nullopt;
    return std::make_pair(*us * 1e-6, wrong.value_or(0));
  };
  const auto [oop, oop_wrong] = time_at(columns_.out_of_place, "out-of-place");
  CollectivePoint p;
  p.bytes = *bytes;
  p.out_of_place_seconds = oop;
  p.seconds = oop;
  double wrong = oop_wrong;
  if (columns_.in_place != 0) {
    const auto [ip, ip_wrong] = time_at(columns_.in_place, "in-place");
    p.in_place_seconds = ip;
    p.seconds = 0.5 * (oop + ip);  // the same collective twice: the mean is the estimate
    wrong += ip_wrong;
  }
  if (wrong > 0) {
    result_.notes.push_back(
        fmt::format("{}:{}: skipped: {:g} wrong elements (nccl-tests' "
                    "check failed at that size)",
                    file_, number, wrong));
    return;
  }
  if (p.bytes == 0) return;  // -b 0: nothing moved, nothing to calibrate
  p.source = fmt::format("{}:{}", file_, number);
  auto& points = table_->points;
  for (CollectivePoint& q : points) {
    if (q.bytes != p.bytes) continue;  // -N repeats the sweep: average the repeats
    const double n = static_cast<double>(std::count(q.source.begin(), q.source.end(), '+') + 1);
    q.seconds = (q.seconds * n + p.seconds) / (n + 1);
    q.source += fmt::format("+{}", number);
    return;
  }
  points.push_back(std::move(p));
}

void Parser::end_table() {
  if (!table_) return;
  if (table_->points.empty()) {
    if (short_line_ == 0) fail(table_line_, "the results table has no rows");
  } else {
    std::sort(table_->points.begin(), table_->points.end(),
              [](const CollectivePoint& a, const CollectivePoint& b) { return a.bytes < b.bytes; });
    result_.tables.push_back(std::move(*table_));
  }
  if (short_line_ != 0) {
    result_.notes.push_back(
        fmt::format("{}:{}: the log is cut off inside a results row; "
                    "imported the rows before it",
                    file_, short_line_));
    short_line_ = 0;
  }
  table_.reset();
}

ImportResult Parser::finish(int last_line) {
  end_table();
  if (result_.tables.empty()) fail(last_line, "no nccl-tests results rows in the file");
  return std::move(result_);
}

}  // namespace

std::string nccl_tests_program(sim::CollectiveOp op) {
  for (const auto& [program, o] : programs())
    if (o == op) return program;
  throw InternalError("nccl-tests has no program for collective " + sim::to_string(op));
}

bool looks_like_nccl_tests(std::string_view text) {
  return text.find("algbw") != std::string_view::npos &&
         text.find("busbw") != std::string_view::npos;
}

ImportResult parse_nccl_tests(std::string_view text, const std::string& file) {
  Parser parser(file);
  int number = 0;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(begin, end - begin);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    parser.line(line, ++number);
    begin = end + 1;
  }
  return parser.finish(std::max(number, 1));
}

ImportResult import_files(const std::vector<std::string>& files) {
  ImportResult all;
  for (const std::string& file : files) {
    std::string text = read_text_file(file, "measurement", MAX_MEASUREMENT_FILE_BYTES);
    if (is_gzip(text)) text = gunzip(text, file, MAX_MEASUREMENT_FILE_BYTES);
    if (looks_like_kineto(text)) {
      all.traces.push_back(parse_kineto(text, file, all.notes));
      continue;
    }
    if (!looks_like_nccl_tests(text)) {
      throw CalibrationError(fmt::format(
          "{}:1: not a format loom imports; `loom calibrate import` reads nccl-tests output "
          "(all_reduce_perf, all_gather_perf, reduce_scatter_perf, alltoall_perf, "
          "sendrecv_perf, broadcast_perf, ...) and PyTorch profiler traces (.json, .json.gz)",
          file));
    }
    ImportResult one = parse_nccl_tests(text, file);
    for (auto& t : one.tables) all.tables.push_back(std::move(t));
    for (auto& n : one.notes) all.notes.push_back(std::move(n));
  }
  return all;
}

}  // namespace loom::calibration
