// `loom collective`: nccl-tests-style sweep of one collective over message sizes, simulated
// on a cluster. Columns mirror nccl-tests (size, count, type, redop, root, time, algbw,
// busbw) so a real log can be put beside it; loom adds the algorithm and protocol it chose.
#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <iostream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cli/cluster_flags.hpp"
#include "cli/cmd_calibrate_network.hpp"
#include "cli/commands.hpp"
#include "cli/field_flags.hpp"
#include "cli/flag_grammars.hpp"
#include "common/csv.hpp"
#include "common/document.hpp"
#include "common/error.hpp"
#include "common/limits.hpp"
#include "common/strings.hpp"
#include "common/table.hpp"
#include "common/units.hpp"
#include "sim/calibration/profile.hpp"
#include "sim/engine.hpp"
#include "sim/nccl_constants.hpp"

namespace loom::cli {

namespace {

struct CollectiveFlags {
  ClusterFlags cluster;
  std::string op;
  int ranks = 0;
  std::string group;
  std::string min_bytes = "8";
  std::string max_bytes = "128M";
  double factor = 2;
  int root = 0;
  bool ranks_given = false;
  bool group_given = false;
  bool root_given = false;
  std::string algo = "auto";
  std::string network = "flow";
  std::string format = "table";
  std::string calibration;  // profile path; empty: the model alone
};

// The largest message a sweep accepts (1 TiB) and the most rows it prints.
constexpr double MAX_SIZE_BYTES = TiB;
constexpr int MAX_ROWS = 200;

// nccl-tests sizes ("8", "64K", "1M", "8G": powers of 1024) or loom quantities ("8GiB", "1MB").
// Throws ValidationError naming `field` for a negative, zero, fractional, non-finite or
// > 1 TiB size.
double parse_size(const std::string& text, const char* field) {
  const std::string example = "e.g. 8, 64K, 1M, 8G or 8GiB";
  if (!text.empty() && text.front() == '-') {
    throw ValidationError(
        field, fmt::format("{}: size '{}' is negative; give a size > 0, {}", field, text, example));
  }
  double bytes = -1;
  if (!text.empty()) {
    char last = static_cast<char>(std::toupper(static_cast<unsigned char>(text.back())));
    std::string number = text;
    double scale = 1;
    if (last == 'K' || last == 'M' || last == 'G' || last == 'T') {
      number = text.substr(0, text.size() - 1);
      scale = last == 'K' ? KiB : last == 'M' ? MiB : last == 'G' ? GiB : TiB;
    }
    bool digits = !number.empty();
    for (char c : number)
      digits = digits && (std::isdigit(static_cast<unsigned char>(c)) || c == '.');
    if (digits) {
      try {
        bytes = std::stod(number) * scale;
      } catch (const std::logic_error&) {
        throw ValidationError::bad_value(field, text, example);
      }
    }
  }
  if (bytes < 0) bytes = parse_bytes(text, field);
  if (!(bytes > 0)) {
    throw ValidationError(
        field, fmt::format("{}: size '{}' is zero; give a size > 0, {}", field, text, example));
  }
  // A message is a whole number of bytes: "0.5" would print rows of 0-byte messages.
  if (bytes < 1 || std::floor(bytes) != bytes) {
    throw ValidationError(field, fmt::format("{}: size '{}' is {} bytes, not a whole number of "
                                             "bytes >= 1; give one, {}",
                                             field, text, bytes, example));
  }
  if (!(bytes <= MAX_SIZE_BYTES)) {
    throw ValidationError(field, fmt::format("{}: size '{}' is above the 1 TiB limit; give at "
                                             "most 1T",
                                             field, text));
  }
  return bytes;
}

}  // namespace

// "0,1,2,3" or "0-7" or "0-3,8-11".
std::vector<int> parse_group(const std::string& text) {
  std::vector<int> ranks;
  size_t pos = 0;
  auto bad = [&] {
    return ValidationError::bad_value("--group", text,
                                      "comma-separated ranks or ranges, e.g. 0,1,2,3 or 0-7");
  };
  // Ranges expand: "0-1000000" repeated would otherwise grow without bound (issue 34).
  auto too_many = [&] {
    return ValidationError("--group", fmt::format("--group: more than {} ranks (loom's limit "
                                                  "MAX_CLUSTER_GPUS, docs/limits.md); list each "
                                                  "rank of the group once",
                                                  MAX_CLUSTER_GPUS));
  };
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string item =
        text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t dash = item.find('-');
    try {
      size_t used = 0;
      if (dash == std::string::npos) {
        if (static_cast<std::int64_t>(ranks.size()) >= MAX_CLUSTER_GPUS) throw too_many();
        ranks.push_back(std::stoi(item, &used));
        if (used != item.size()) throw bad();
      } else {
        int a = std::stoi(item.substr(0, dash), &used);
        int b = std::stoi(item.substr(dash + 1));
        if (b < a || a < 0 || b - a > (1 << 20)) throw bad();
        if (static_cast<std::int64_t>(ranks.size()) + (b - a) >= MAX_CLUSTER_GPUS) throw too_many();
        for (int r = a; r <= b; ++r) ranks.push_back(r);
      }
    } catch (const std::logic_error&) {
      throw bad();
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return ranks;
}

namespace {

bool is_reduction(sim::CollectiveOp op) {
  return op == sim::CollectiveOp::ALL_REDUCE || op == sim::CollectiveOp::REDUCE ||
         op == sim::CollectiveOp::REDUCE_SCATTER;
}

bool is_rooted(sim::CollectiveOp op) {
  return op == sim::CollectiveOp::BROADCAST || op == sim::CollectiveOp::REDUCE ||
         op == sim::CollectiveOp::SCATTER || op == sim::CollectiveOp::GATHER;
}

// The group: --group LIST (distinct ranks of the cluster) or --ranks N (0..N-1), default
// every GPU. Throws ValidationError naming the flag at fault.
std::vector<int> resolve_ranks(const CollectiveFlags& f, const topo::Cluster& cluster) {
  std::vector<int> ranks;
  if (f.group_given && f.ranks_given) {
    throw ValidationError("--group", "--group: give either --ranks N or --group LIST, not both");
  }
  if (f.group_given) {
    ranks = parse_group(f.group);
    std::set<int> seen;
    for (int r : ranks) {
      if (r < 0 || r >= cluster.num_gpus()) {
        throw ValidationError(
            "--group", fmt::format("--group: rank {} is outside the cluster's ranks 0..{}; add "
                                   "--nodes or list ranks below {}",
                                   r, cluster.num_gpus() - 1, cluster.num_gpus()));
      }
      if (!seen.insert(r).second) {
        throw ValidationError("--group", fmt::format("--group: rank {} appears twice; list each "
                                                     "rank once",
                                                     r));
      }
    }
  } else {
    if (f.ranks_given && f.ranks < 1) {
      throw ValidationError("--ranks", fmt::format("--ranks: must be at least 1, got {}; give "
                                                   "a rank count up to the cluster's {} GPUs",
                                                   f.ranks, cluster.num_gpus()));
    }
    int n = f.ranks_given ? f.ranks : cluster.num_gpus();
    if (n > cluster.num_gpus()) {
      throw ValidationError("--ranks", fmt::format("--ranks: {} exceeds the cluster's {} GPUs; "
                                                   "add --nodes or lower --ranks",
                                                   n, cluster.num_gpus()));
    }
    for (int r = 0; r < n; ++r) ranks.push_back(r);
  }
  return ranks;
}

// Checks the root, group and size flags against the op and group; returns the sweep's
// smallest and largest size in bytes. Throws ValidationError naming the flag at fault.
std::pair<double, double> check_sweep(const CollectiveFlags& f, sim::CollectiveOp op,
                                      const std::vector<int>& ranks) {
  if (f.root_given && !is_rooted(op)) {
    throw ValidationError("--root", fmt::format("--root has no effect with --op {}: only "
                                                "broadcast, reduce, scatter and gather have a "
                                                "root; drop it or change --op",
                                                f.op));
  }
  if (is_rooted(op) && (f.root < 0 || f.root >= static_cast<int>(ranks.size()))) {
    throw ValidationError("--root", fmt::format("--root: {} is outside the group of {} ranks; "
                                                "give a position in the group, 0..{}",
                                                f.root, ranks.size(), ranks.size() - 1));
  }
  if (op == sim::CollectiveOp::SEND_RECV && ranks.size() < 2) {
    throw ValidationError("--ranks",
                          "--ranks: send_recv needs at least 2 ranks; give --ranks 2 "
                          "or a --group of 2");
  }
  const double min_bytes = parse_size(f.min_bytes, "-b");
  const double max_bytes = parse_size(f.max_bytes, "-e");
  if (!(max_bytes >= min_bytes)) {
    throw ValidationError("-e", fmt::format("-e: maximum size {} is below the minimum -b {}; "
                                            "give -e >= -b",
                                            f.max_bytes, f.min_bytes));
  }
  if (!(f.factor > 1) || !std::isfinite(f.factor)) {
    throw ValidationError("-f", fmt::format("-f: factor {} must be a number > 1 (each row "
                                            "multiplies the size by it), e.g. -f 2",
                                            f.factor));
  }
  const double rows_needed = std::floor(std::log(max_bytes / min_bytes) / std::log(f.factor)) + 1;
  if (rows_needed > MAX_ROWS) {
    throw ValidationError("-f",
                          fmt::format("-f: factor {} gives {:.0f} sizes from -b {} to -e "
                                      "{}; at most {} rows, raise -f or narrow the range",
                                      f.factor, rows_needed, f.min_bytes, f.max_bytes, MAX_ROWS));
  }
  return {min_bytes, max_bytes};
}

int run_collective(const CollectiveFlags& f) {
  const sim::CollectiveOp op = sim::parse_collective_op(f.op, "--op");
  const sim::Algorithm algo = sim::parse_algorithm(f.algo, "--algo");
  const sim::NetworkMode mode = sim::parse_network_mode(f.network, "--network");
  const Format format = parse_format(f.format);
  topo::Cluster cluster = resolve_cluster(f.cluster);

  const std::vector<int> ranks = resolve_ranks(f, cluster);
  // A profile with a fitted network times every collective through the model with its
  // parameters; one without replays its measured times (algo auto only).
  std::optional<calibration::Profile> profile;
  if (!f.calibration.empty()) profile = calibration::read_profile(f.calibration);
  const calibration::FittedNetwork* network =
      profile && profile->network ? &*profile->network : nullptr;
  if (profile && !network && algo != sim::Algorithm::AUTO) {
    throw ValidationError("--calibration",
                          fmt::format("--calibration has no effect with --algo {}: measured "
                                      "times stand in for --algo auto only (fit the network, "
                                      "`loom calibrate fit-network`, to model every algorithm); "
                                      "drop one of them",
                                      f.algo));
  }
  const auto [min_bytes, max_bytes] = check_sweep(f, op, ranks);
  const int n = static_cast<int>(ranks.size());
  const double type_bytes = 4;  // float, as nccl-tests' default
  const int root = is_rooted(op) ? f.root : -1;
  std::optional<calibration::MeasuredCollectives> measured;
  if (profile && !network) measured.emplace(*profile);
  std::vector<CoveredGroup> covered;
  std::vector<std::string> notes;
  if (network) {
    covered.push_back({sim::to_string(op), n, nodes_spanned(ranks, cluster),
                       calibration::coverage(*network, nodes_spanned(ranks, cluster))});
    notes = fitted_network_notes(*network, cluster);
    if (format != Format::JSON)
      for (const auto& note : notes) std::cerr << "loom: note: " << note << "\n";
  }

  OrderedJson rows = OrderedJson::array();
  Table table({"size(B)", "count", "type", "redop", "root", "time(us)", "algbw(GB/s)",
               "busbw(GB/s)", "algo", "proto"});
  table.align_left(2);
  table.align_left(3);
  table.align_left(8);
  table.align_left(9);
  CsvTable csv("collective", 1,
               {"op", "ranks", "size_bytes", "count", "type", "redop", "root", "time_us",
                "algbw_GBps", "busbw_GBps", "algorithm", "protocol"});
  for (double size = min_bytes; size <= max_bytes * (1 + 1e-12); size *= f.factor) {
    // nccl-tests rounds sizes down to a multiple of (type size x ranks) for sharded ops.
    double count = std::floor(size / type_bytes);
    if (op == sim::CollectiveOp::ALL_GATHER || op == sim::CollectiveOp::REDUCE_SCATTER ||
        op == sim::CollectiveOp::ALL_TO_ALL || op == sim::CollectiveOp::SCATTER ||
        op == sim::CollectiveOp::GATHER) {
      count = std::floor(count / n) * n;
    }
    if (op == sim::CollectiveOp::BARRIER) count = 0;
    const double bytes = count * type_bytes;
    sim::EngineOptions options;
    options.network = mode;
    options.field_names = flag_names();
    if (measured) options.collective_override = &*measured;
    if (network) {
      options.link_efficiency = network->link_efficiency();
      options.nccl_tuning = network->nccl_tuning();
    }
    sim::Engine engine(cluster, options);
    sim::CollectiveSpec spec;
    spec.request.op = op;
    spec.request.ranks = ranks;
    spec.request.bytes = bytes;
    spec.request.root = is_rooted(op) ? f.root : 0;
    spec.request.algorithm = algo;
    spec.label = f.op;
    sim::TaskId task = engine.add_collective(spec);
    engine.run();
    const double seconds = sim::to_seconds(engine.finish(task));
    const double algbw = seconds > 0 ? bytes / seconds / 1e9 : 0;
    const double busbw = algbw * sim::bus_bandwidth_factor(op, n);
    // A size the profile covers was timed from the measurement, not lowered.
    const bool from_profile = engine.measured_time(spec.request).has_value();
    const std::string algorithm =
        from_profile ? "measured" : sim::to_string(engine.schedule(task).algorithm);
    const std::string protocol =
        from_profile ? "-" : sim::to_string(engine.schedule(task).protocol);
    const std::string redop = is_reduction(op) ? "sum" : "none";
    table.add_row({fmt::format("{:.0f}", bytes), fmt::format("{:.0f}", count), "float", redop,
                   std::to_string(root), fmt::format("{:.2f}", seconds * 1e6),
                   fmt::format("{:.2f}", algbw), fmt::format("{:.2f}", busbw), algorithm,
                   protocol});
    OrderedJson row;
    row["size_bytes"] = static_cast<std::int64_t>(bytes);
    row["count"] = static_cast<std::int64_t>(count);
    row["type"] = "float";
    row["redop"] = redop;
    row["root"] = root;
    row["time_us"] = seconds * 1e6;
    row["algbw_GBps"] = algbw;
    row["busbw_GBps"] = busbw;
    row["algorithm"] = algorithm;
    row["protocol"] = protocol;
    rows.push_back(row);
    csv.add_row({std::string(sim::to_string(op)), std::to_string(n), fmt::format("{:.0f}", bytes),
                 fmt::format("{:.0f}", count), "float", redop, std::to_string(root),
                 csv_number(seconds * 1e6), csv_number(algbw), csv_number(busbw), algorithm,
                 protocol});
  }

  if (format == Format::JSON) {
    OrderedJson context;
    context["cluster"] = cluster.name;
    context["op"] = sim::to_string(op);
    context["ranks"] = ranks;
    context["algorithm"] = f.algo;
    context["network"] = sim::to_string(mode);
    context["nccl_constants"] = sim::nccl::RELEASE;
    if (measured) context["calibration"] = f.calibration;
    if (network) context["calibration"] = coverage_json(f.calibration, *network, covered, notes);
    OrderedJson results;
    results["rows"] = rows;
    std::cout << render_document(make_document(context, results));
    return 0;
  }
  if (format == Format::CSV) {
    std::cout << csv.render();
    return 0;
  }
  std::cout << fmt::format(
      "# loom collective: {} on {} ranks of {} ({} network, NCCL {} "
      "constants{})\n",
      sim::to_string(op), n, cluster.name, sim::to_string(mode), sim::nccl::RELEASE,
      measured  ? fmt::format("; measured times from {} where it has them", f.calibration)
      : network ? fmt::format("; network parameters fitted in {}", f.calibration)
                : "");
  std::cout << table.render();
  if (network) std::cout << "\n" << coverage_note(covered);
  return 0;
}

}  // namespace

Command add_collective_command(CLI::App& root) {
  auto flags = std::make_shared<CollectiveFlags>();
  Command command;
  CLI::App* app = root.add_subcommand(
      "collective", "simulate one collective over a range of message sizes (nccl-tests columns)");
  add_cluster_flags(*app, flags->cluster);
  // Help lists come from the registries, so they name exactly what the parsers accept.
  std::vector<std::string> algorithms, modes;
  for (const auto& info : sim::collective_algorithms()) algorithms.push_back(info.name);
  for (const auto& mode : sim::network_modes()) modes.push_back(mode.first);
  app->add_option("--op", flags->op, "operation: " + join(sim::collective_op_names(), ", "))
      ->required();
  app->add_option("--ranks", flags->ranks, "use global ranks 0..N-1 (default: every GPU)")
      ->each([flags](const std::string&) { flags->ranks_given = true; });
  app->add_option("--group", flags->group, "explicit group, e.g. 0,8,16,24 or 0-7")
      ->each([flags](const std::string&) { flags->group_given = true; });
  app->add_option("-b,--minbytes", flags->min_bytes, "smallest size (8, 64K, 1M, 8G or 8GiB)")
      ->capture_default_str();
  app->add_option("-e,--maxbytes", flags->max_bytes, "largest size")->capture_default_str();
  app->add_option("-f,--stepfactor", flags->factor, "multiply the size by this each row")
      ->capture_default_str();
  app->add_option("--root", flags->root, "root index within the group for rooted ops")
      ->capture_default_str()
      ->each([flags](const std::string&) { flags->root_given = true; });
  app->add_option("--algo", flags->algo, "algorithm (" + join(algorithms, ", ") + ")")
      ->capture_default_str();
  app->add_option("--network", flags->network, "network model: " + join(modes, ", "))
      ->capture_default_str();
  app->add_option("--calibration", flags->calibration,
                  "profile: with a fitted network (`loom calibrate fit-network`) the model runs "
                  "with its parameters; otherwise measured times replace the model for the "
                  "(op, ranks, nodes) and sizes it covers (algo auto)");
  add_format_flag(*app, flags->format, {"table", "json", "csv"});
  command.app = app;
  command.run = [flags]() { return run_collective(*flags); };
  return command;
}

}  // namespace loom::cli
