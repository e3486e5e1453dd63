#include "sim/calibration/nccl_tests.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "common/strings.hpp"
#include "sim/calibration/gzip.hpp"
#include "sim/calibration/kineto.hpp"
#include "sim/calibration/nccl_tests_fit.hpp"
#include "sim/calibration/nccl_tests_text.hpp"

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

// `token` as a whole number from 0 to 2^30 (a rank or group index), else nullopt: checked as
// a double before it becomes an int.
std::optional<int> index_of(std::string_view token) {
  const auto value = nccl_text::number_of(token);
  if (!value || *value < 0 || *value > 0x1p30 || std::floor(*value) != *value) return std::nullopt;
  return static_cast<int>(*value);
}

// Signed whole number (a root: -1 or a rank), else nullopt.
std::optional<int> root_of(std::string_view token) {
  const auto value = nccl_text::number_of(token);
  if (!value || *value < -1 || *value > 0x1p30 || std::floor(*value) != *value) return std::nullopt;
  return static_cast<int>(*value);
}

constexpr size_t NO_COLUMN = static_cast<size_t>(-1);

// Reads one nccl-tests text, line by line (see parse_nccl_tests). State per table is reset in
// start_table; nothing grows with the table except its points, so a log is read in linear time.
class Parser {
 public:
  Parser(const std::string& file, const ImportOptions& options) : file_(file), options_(options) {}

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
    size_t type = NO_COLUMN, redop = NO_COLUMN, root = NO_COLUMN;
  };
  // A size measured more than once (-N): running means and the rows that gave them.
  struct Repeats {
    int rows = 1;
    int last_line = 0;
  };

  [[noreturn]] void fail(int number, const std::string& message) const {
    throw CalibrationError(fmt::format("{}:{}: {}", file_, number, message));
  }
  void command(std::string_view text, int number);
  void comment(std::string_view text, int number);
  void device_line(int number);
  void start_table(int number);
  void row(int number);
  void add_point(CollectivePoint p, int number);
  bool same_series(int number);
  void resolve_op(CollectiveTable& table);
  void end_table();

  std::string file_;
  ImportOptions options_;
  ImportResult result_;
  std::vector<std::string_view> tokens_;  // the current line's, capacity reused
  std::vector<Device> devices_;
  std::string program_;
  std::map<std::string, std::string> exported_;     // `export NCCL_X=...`, bare assignments
  std::map<std::string, std::string> command_env_;  // the last command line's
  std::string continued_;                           // a command line continued with '\'
  int continued_line_ = 0;
  std::optional<CollectiveTable> table_;
  int table_line_ = 0;
  Columns columns_;
  int short_line_ = 0;  // a row cut short: fine only as the log's last row
  nccl_fit::Signature signature_;
  std::string series_;  // "type redop root" of the table's first row
  int other_series_rows_ = 0, other_series_line_ = 0;
  std::unordered_map<double, size_t> index_;  // size -> point (-N repeats); not iterated
  std::vector<Repeats> repeats_;              // by point
};

void Parser::line(std::string_view raw, int number) {
  if (raw.find("NCCL INFO") != std::string_view::npos ||
      raw.find("NCCL WARN") != std::string_view::npos) {
    // NCCL_DEBUG chatter from any rank, anywhere in the log; NCCL reports the variables set.
    if (const auto set = nccl_text::env_reported(raw)) {
      command_env_[set->first] = set->second;
      if (table_) table_->env[set->first] = set->second;
    }
    return;
  }
  const std::string_view text = nccl_text::strip_launcher_prefix(raw);
  std::string_view trimmed = text;
  while (!trimmed.empty() && std::isspace(static_cast<unsigned char>(trimmed.back())))
    trimmed.remove_suffix(1);
  if (!trimmed.empty() && trimmed.back() == '\\') {  // a wrapped command line
    if (continued_.empty()) continued_line_ = number;
    continued_.append(trimmed.substr(0, trimmed.size() - 1)).push_back(' ');
    if (continued_.size() > MAX_NCCL_TESTS_LINE_BYTES) {
      fail(continued_line_, fmt::format("a command line continued with '\\' runs past {} bytes "
                                        "(MAX_NCCL_TESTS_LINE_BYTES); join it or cut it short",
                                        MAX_NCCL_TESTS_LINE_BYTES));
    }
    return;
  }
  if (!continued_.empty()) {
    const std::string joined = continued_ + std::string(text);
    continued_.clear();
    command(joined, continued_line_);
    return;
  }
  nccl_text::split_tokens(text, tokens_);
  if (tokens_.empty()) return;
  if (tokens_.front().front() == '#') {
    comment(text, number);
    return;
  }
  if (table_ && std::isdigit(static_cast<unsigned char>(tokens_.front().front()))) {
    row(number);
    return;
  }
  command(text, number);
}

// A line that is neither a comment nor a row: a command line (program, NCCL_* variables),
// an `export`, or noise (Open MPI warnings, "NCCL version ...").
void Parser::command(std::string_view text, int number) {
  (void)number;
  const auto program = nccl_text::program_in(text);
  if (program) program_ = *program;
  if (text.find("NCCL_") == std::string_view::npos) return;
  nccl_text::split_tokens(text, tokens_);
  if (program) {
    command_env_.clear();
    nccl_text::env_in(tokens_, command_env_);
  } else {
    nccl_text::env_in(tokens_, exported_);
  }
}

void Parser::comment(std::string_view text, int number) {
  if (auto program = nccl_text::program_in(text)) program_ = *program;
  if (tokens_.front() == "#") {
    tokens_.erase(tokens_.begin());
  } else {
    tokens_.front().remove_prefix(1);
  }
  if (tokens_.empty()) return;
  const auto has = [&](std::string_view word) {
    return std::find(tokens_.begin(), tokens_.end(), word) != tokens_.end();
  };
  if (tokens_.front() == "nThread") {  // a new run: its own devices follow
    end_table();
    devices_.clear();
  } else if (tokens_.front() == "Rank") {
    device_line(number);
  } else if (has("size") && has("busbw")) {
    start_table(number);
  } else if (text.find("Out of bounds values") != std::string_view::npos ||
             text.find("Avg bus bandwidth") != std::string_view::npos) {
    end_table();
  }
}

// "#  Rank  0 Group  0 Pid   6899 on host-a device  0 [0000:04:00] NVIDIA H100 80GB HBM3";
// older releases may print no "Group".
void Parser::device_line(int number) {
  const auto& t = tokens_;
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

void Parser::start_table(int number) {
  end_table();
  const auto& t = tokens_;
  Columns c;
  std::vector<size_t> times;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == "timestamp") continue;
    if (t[i] == "size") c.size = i;
    if (t[i] == "type") c.type = i;
    if (t[i] == "redop") c.redop = i;
    if (t[i] == "root") c.root = i;
    if (t[i] == "time" || t[i] == "cputime") times.push_back(i);
    ++c.count;
  }
  if (times.empty()) fail(number, "results header without a 'time' column");
  c.out_of_place = times[0];
  c.in_place = times.size() > 1 ? times[1] : 0;
  CollectiveTable table;
  if (!program_.empty()) {
    const std::string_view base = nccl_text::program_base(program_);
    const auto known = std::find_if(programs().begin(), programs().end(),
                                    [&](const auto& p) { return p.first == base; });
    if (known == programs().end()) {
      std::vector<std::string> names;
      for (const auto& p : programs()) names.push_back(p.first);
      fail(number, fmt::format("nccl-tests program '{}' has no loom collective; loom imports {}",
                               program_, join(names, ", ")));
    }
    if (options_.op && *options_.op != known->second) {
      fail(number, fmt::format("--op {} contradicts the program '{}' the log names before this "
                               "table; drop --op or import this file on its own",
                               sim::to_string(*options_.op), program_));
    }
    table.op = known->second;
    table.program = program_;
  }
  if (devices_.empty()) {
    fail(number,
         "a nccl-tests table without the '#  Rank ...' device lines before it; loom "
         "takes the group size and node count from them, so keep the header block");
  }
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
  table.env = exported_;
  for (const auto& [name, value] : command_env_) table.env[name] = value;
  table_ = std::move(table);
  table_line_ = number;
  columns_ = c;
  signature_ = nccl_fit::Signature{};
  signature_.group_size = table_->group_size;
  series_.clear();
  other_series_rows_ = 0;
  index_.clear();
  repeats_.clear();
}

// Whether the row continues the table's first (type, redop, root): `-d all` / `-o all` runs
// sweep the sizes again for each, and those are different measurements.
bool Parser::same_series(int number) {
  std::string key;
  for (size_t column : {columns_.type, columns_.redop, columns_.root}) {
    if (column == NO_COLUMN) continue;
    key.append(tokens_[column]).push_back(' ');
  }
  if (series_.empty()) {
    series_ = key;
    if (columns_.type != NO_COLUMN) table_->dtype = std::string(tokens_[columns_.type]);
    if (columns_.redop != NO_COLUMN) signature_.redop = std::string(tokens_[columns_.redop]);
    if (columns_.root != NO_COLUMN) {
      signature_.root = root_of(tokens_[columns_.root]);
      if (!signature_.root) {
        fail(number, fmt::format("root '{}' is not -1 or a rank; expected {}",
                                 tokens_[columns_.root], ROW_LAYOUT));
      }
    }
    return true;
  }
  if (key == series_) return true;
  if (other_series_rows_++ == 0) other_series_line_ = number;
  return false;
}

void Parser::row(int number) {
  const auto& t = tokens_;
  if (short_line_ != 0) {
    fail(short_line_, fmt::format("results row cut short in the middle of the table; expected "
                                  "{} columns: {}",
                                  columns_.count, ROW_LAYOUT));
  }
  if (t.size() < columns_.count) {
    short_line_ = number;
    return;
  }
  const auto bytes = nccl_text::number_of(t[columns_.size]);
  if (!bytes || *bytes < 0 || *bytes > 0x1p53 || *bytes != std::floor(*bytes)) {
    fail(number, fmt::format("size '{}' is not a whole number of bytes up to 2^53; expected {}",
                             t[columns_.size], ROW_LAYOUT));
  }
  if (!same_series(number)) return;
  const auto time_at = [&](size_t column, const char* which) {
    const auto us = nccl_text::number_of(t[column]);
    if (!us || !(*us > 0)) {
      fail(number, fmt::format("{} time '{}' is not a positive number of microseconds; "
                               "expected {}",
                               which, t[column], ROW_LAYOUT));
    }
    if (column + 2 < t.size()) signature_.ratio.add(t[column + 1], t[column + 2]);
    const auto wrong = column + 3 < t.size() ? nccl_text::number_of(t[column + 3]) : std::nullopt;
    return std::make_pair(*us * 1e-6, wrong.value_or(0));
  };
  const auto [oop, oop_wrong] = time_at(columns_.out_of_place, "out-of-place");
  CollectivePoint p;
  p.bytes = *bytes;
  p.out_of_place_seconds = oop;
  double wrong = oop_wrong;
  if (columns_.in_place != 0) {
    const auto [ip, ip_wrong] = time_at(columns_.in_place, "in-place");
    p.in_place_seconds = ip;
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
  add_point(std::move(p), number);
}

// A new size, or -N's repeat of one: repeats are averaged (each time series apart), found
// through a hash of the size so that a long log stays linear.
void Parser::add_point(CollectivePoint p, int number) {
  auto& points = table_->points;
  const auto [it, added] = index_.try_emplace(p.bytes, points.size());
  if (added) {
    p.source = fmt::format("{}:{}", file_, number);
    points.push_back(std::move(p));
    repeats_.push_back(Repeats{1, number});
    return;
  }
  CollectivePoint& q = points[it->second];
  Repeats& r = repeats_[it->second];
  const double n = r.rows;
  const auto mean = [n](std::optional<double>& have, const std::optional<double>& more) {
    if (have && more) *have = (*have * n + *more) / (n + 1);
  };
  mean(q.out_of_place_seconds, p.out_of_place_seconds);
  mean(q.in_place_seconds, p.in_place_seconds);
  ++r.rows;
  r.last_line = number;
  constexpr int LISTED = 4;  // lines named in the source; more are counted
  if (r.rows <= LISTED) q.source += fmt::format("+{}", number);
}

void Parser::resolve_op(CollectiveTable& table) {
  if (!table.program.empty()) return;
  const std::vector<sim::CollectiveOp> fits = nccl_fit::candidates(signature_);
  if (options_.op) {
    table.op = *options_.op;
    if (!fits.empty() && std::find(fits.begin(), fits.end(), table.op) == fits.end()) {
      result_.notes.push_back(
          fmt::format("{}:{}: --op {} stated, though the table's columns fit {} ({})", file_,
                      table_line_, sim::to_string(table.op), sim::to_string(fits.front()),
                      nccl_fit::evidence(signature_, fits.front())));
    }
    return;
  }
  if (fits.size() == 1) {
    table.op = fits.front();
    table.op_inferred_from = nccl_fit::evidence(signature_, table.op);
    result_.notes.push_back(fmt::format(
        "{}:{}: the log names no '<op>_perf' program; {} inferred from {} (--op overrides)", file_,
        table_line_, sim::to_string(table.op), table.op_inferred_from));
    return;
  }
  std::vector<std::string> names;
  for (sim::CollectiveOp op : fits) names.push_back(sim::to_string(op));
  if (fits.empty()) {
    fail(table_line_,
         fmt::format("the log names no '<op>_perf' program and no nccl-tests collective prints "
                     "such a table (busbw/algbw {:.4g} to {:.4g} with n={}{}{}); state it with "
                     "--op NAME",
                     signature_.ratio.low, signature_.ratio.high, signature_.group_size,
                     signature_.redop.empty() ? "" : ", redop " + signature_.redop,
                     signature_.root ? fmt::format(", root {}", *signature_.root) : ""));
  }
  fail(table_line_,
       fmt::format("the log names no '<op>_perf' program and nccl-tests prints {} alike ({}); "
                   "state which with --op {}",
                   join(names, " and "), nccl_fit::evidence(signature_, fits.front()),
                   join(names, " or --op ")));
}

void Parser::end_table() {
  if (!table_) return;
  CollectiveTable& table = *table_;
  if (table.points.empty()) {
    if (short_line_ == 0) fail(table_line_, "the results table has no rows");
  } else {
    resolve_op(table);
    for (size_t i = 0; i < table.points.size(); ++i) {
      CollectivePoint& p = table.points[i];
      const Repeats& r = repeats_[i];
      if (r.rows > 4) p.source += fmt::format("+...+{} ({} rows averaged)", r.last_line, r.rows);
      const auto& oop = p.out_of_place_seconds;
      const auto& ip = p.in_place_seconds;
      // The same collective twice: the mean is the estimate.
      p.seconds = oop && ip ? 0.5 * (*oop + *ip) : oop.value_or(ip.value_or(0));
    }
    std::sort(table.points.begin(), table.points.end(),
              [](const CollectivePoint& a, const CollectivePoint& b) { return a.bytes < b.bytes; });
    nccl_fit::mark_outliers(table, result_.notes);
    if (const auto algo = table.env.find("NCCL_ALGO"); algo != table.env.end())
      table.forced_algo = algo->second;
    if (const auto proto = table.env.find("NCCL_PROTO"); proto != table.env.end())
      table.forced_proto = proto->second;
    std::vector<std::string> forced;
    if (!table.forced_algo.empty()) forced.push_back("NCCL_ALGO=" + table.forced_algo);
    if (!table.forced_proto.empty()) forced.push_back("NCCL_PROTO=" + table.forced_proto);
    if (!forced.empty()) {
      result_.notes.push_back(fmt::format(
          "{}:{}: the log sets {}; the table is recorded as forced, not NCCL's own choice", file_,
          table_line_, join(forced, " ")));
    }
    if (other_series_rows_ > 0) {
      result_.notes.push_back(fmt::format(
          "{}:{}: skipped {} rows of another type/redop/root than the table's first ({}); "
          "run one -d and -o per log to import them",
          file_, other_series_line_, other_series_rows_, series_.substr(0, series_.size() - 1)));
    }
    result_.tables.push_back(std::move(table));
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

std::vector<std::string> nccl_tests_op_names() {
  std::vector<std::string> names;
  for (const auto& p : programs()) names.push_back(sim::to_string(p.second));
  return names;
}

bool looks_like_nccl_tests(std::string_view text) {
  return text.find("algbw") != std::string_view::npos &&
         text.find("busbw") != std::string_view::npos;
}

ImportResult parse_nccl_tests(std::string_view text, const std::string& file,
                              const ImportOptions& options) {
  Parser parser(file, options);
  int number = 0;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(begin, end - begin);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    ++number;
    if (line.size() > MAX_NCCL_TESTS_LINE_BYTES) {
      throw CalibrationError(fmt::format(
          "{}:{}: line of {} bytes; loom reads nccl-tests lines of up to {} bytes "
          "(MAX_NCCL_TESTS_LINE_BYTES): nccl-tests rows are about 150, so this is not its output",
          file, number, line.size(), MAX_NCCL_TESTS_LINE_BYTES));
    }
    parser.line(line, number);
    begin = end + 1;
  }
  return parser.finish(std::max(number, 1));
}

ImportResult import_files(const std::vector<std::string>& files, const ImportOptions& options) {
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
    ImportResult one = parse_nccl_tests(text, file, options);
    for (auto& t : one.tables) all.tables.push_back(std::move(t));
    for (auto& n : one.notes) all.notes.push_back(std::move(n));
  }
  return all;
}

}  // namespace loom::calibration
