#include "harness/nccl_tests_format.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "sim/calibration/nccl_tests.hpp"
#include "sim/collectives.hpp"

namespace loom::harness {

namespace {

// nccl-tests' time column: two decimals while it fits in 7 characters.
std::string time_text(double us) {
  return us < 1e4   ? fmt::format("{:7.2f}", us)
         : us < 1e6 ? fmt::format("{:7.1f}", us)
                    : fmt::format("{:7.0f}", us);
}

std::string half_row(double seconds, double bytes, double factor) {
  const double algbw = bytes / seconds / 1e9;  // GB/s, as nccl-tests (1e9, not 2^30)
  return fmt::format("  {}  {:6.2f}  {:6.2f}  {:>6}", time_text(seconds * 1e6), algbw,
                     algbw * factor, "N/A");
}

}  // namespace

std::string nccl_tests_program(const std::string& op) {
  return calibration::nccl_tests_program(sim::parse_collective_op(op));
}

double bus_bandwidth_factor(const std::string& op, int ranks) {
  return sim::bus_bandwidth_factor(sim::parse_collective_op(op), ranks);  // nccl-tests' factors
}

std::string nccl_tests_type(const std::string& op) {
  (void)op;
  return "float";
}

std::string nccl_tests_redop(const std::string& op) {
  return op == "all_reduce" || op == "reduce_scatter" ? "sum" : "none";
}

std::vector<RankDevice> one_host(const std::vector<std::string>& gpu_names,
                                 const std::string& host) {
  std::vector<RankDevice> ranks;
  for (size_t i = 0; i < gpu_names.size(); ++i)
    ranks.push_back({host, static_cast<int>(i), gpu_names[i]});
  return ranks;
}

std::string nccl_tests_text(const std::string& op, int group_size,
                            const std::vector<CollectiveResult>& rows,
                            const std::vector<RankDevice>& ranks, const Options& options) {
  std::string out =
      fmt::format("# Collective test starting: {} (loom-harness nccl)\n", nccl_tests_program(op));
  out += fmt::format(
      "# nThread 1 nGpus {} minBytes {} maxBytes {} step: 2(factor) warmup iters: {} iters: {} "
      "agg iters: 1 validation: 0 graph: 0\n#\n# Using devices\n",
      group_size, options.min_bytes, options.max_bytes, options.warmup, options.iterations);
  for (int rank = 0; rank < group_size; ++rank) {
    const RankDevice& r = ranks.at(static_cast<size_t>(rank));
    out += fmt::format("#  Rank {:2} Group  0 Pid {:6} on {:>10} device {:2} [0x00] {}\n", rank, 0,
                       r.host, r.device, r.name);
  }
  out +=
      "#\n"
      "#                                                              out-of-place                "
      "       in-place          \n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
      "time   algbw   busbw #wrong\n"
      "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            "
      "(us)  (GB/s)  (GB/s)       \n";
  const double factor = bus_bandwidth_factor(op, group_size);
  const int root = op == "broadcast" ? 0 : -1;
  double busbw_sum = 0;
  for (const CollectiveResult& r : rows) {
    const double bytes = static_cast<double>(r.bytes);
    out += fmt::format("{:12}  {:12}  {:>8}  {:>6}  {:6}", r.bytes, r.count, nccl_tests_type(op),
                       nccl_tests_redop(op), root);
    out += half_row(r.out_of_place.median, bytes, factor);
    out += half_row(r.in_place.median, bytes, factor) + "\n";
    busbw_sum += bytes / r.out_of_place.median / 1e9 * factor;
  }
  const double avg = rows.empty() ? 0 : busbw_sum / static_cast<double>(rows.size());
  out += fmt::format("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : {:g} \n#\n\n", avg);
  return out;
}

std::string nccl_tests_report(const std::vector<CollectiveResult>& rows,
                              const std::vector<RankDevice>& ranks, const Options& options) {
  std::vector<std::pair<std::string, int>> order;
  for (const CollectiveResult& r : rows) {
    const std::pair<std::string, int> key{r.op, r.group_size};
    if (std::find(order.begin(), order.end(), key) == order.end()) order.push_back(key);
  }
  std::string out;
  for (const auto& [op, group] : order) {
    std::vector<CollectiveResult> table;
    for (const CollectiveResult& r : rows)
      if (r.op == op && r.group_size == group) table.push_back(r);
    std::sort(table.begin(), table.end(), [](const CollectiveResult& a, const CollectiveResult& b) {
      return a.bytes < b.bytes;
    });
    out += nccl_tests_text(op, group, table, ranks, options);
  }
  return out;
}

}  // namespace loom::harness
