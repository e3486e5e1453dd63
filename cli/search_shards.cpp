#include "cli/search_shards.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <thread>

#include "cli/error_line.hpp"
#include "cli/mpi_world.hpp"
#include "common/error.hpp"
#include "common/json_util.hpp"

namespace loom::cli {
namespace {

constexpr const char* SHARD_HELP = "K/N with 0 <= K < N (shard K of N, counted from 0)";

strategies::SearchShard checked(long long index, long long count, const std::string& given) {
  if (count < 1 || count > (1 << 24) || index < 0 || index >= count)
    throw ValidationError::bad_value("--shard", given, SHARD_HELP);
  return {static_cast<int>(index), static_cast<int>(count)};
}

// The partial result of one shard: the tally's JSON with the shard named.
std::string partial_json(const strategies::SearchTally& tally, const strategies::SearchSpace& space,
                         strategies::SearchShard shard) {
  nlohmann::json j = nlohmann::json::parse(strategies::tally_to_json(tally, space));
  j["shard"] = shard.index;
  j["shards"] = shard.count;
  return j.dump() + "\n";
}

// Shards of one space hold each candidate once: their sums stay within the space's (and so
// never overflow, each count being at most 2^53).
void check_merged_counts(const strategies::SearchTally& merged,
                         const strategies::SearchSpace& space, const std::string& file) {
  std::int64_t candidates = 0;
  if (__builtin_mul_overflow(space.shapes(), space.switch_combinations(), &candidates))
    candidates = INT64_MAX;
  if (merged.shapes > space.shapes() || merged.enumerated > candidates ||
      merged.invalid + merged.out_of_memory + merged.fitting > merged.enumerated) {
    throw ValidationError(
        "--merge", fmt::format("--merge: with {} the shards count {} shapes and {} candidates, "
                               "more than the search has ({} and {}); a file is damaged or of "
                               "another split: run its shard again",
                               file, merged.shapes, merged.enumerated, space.shapes(), candidates));
  }
}

// Reads, checks and merges the partial results: one search (the fingerprint, tally_from_json),
// the same --exact / --sample, shards 0 .. N-1 once each, rows the shard's own (verify_tally).
strategies::SearchTally merge_partials(const std::vector<std::string>& files,
                                       const models::ModelSpec& model,
                                       const strategies::SearchSpace& space,
                                       const topo::Cluster& cluster,
                                       const strategies::SearchOptions& options) {
  strategies::SearchTally merged;
  std::vector<std::string> seen;
  int count = 0;
  for (const std::string& file : files) {
    const std::string text = read_text_file(file, "partial search result (--merge)");
    const nlohmann::json j = parse_json_text(text, file);
    if (!j.is_object() || !j.contains("shard") || !j.contains("shards") ||
        !j["shard"].is_number_integer() || !j["shards"].is_number_integer()) {
      throw ConfigError(file, "",
                        fmt::format("{}: not a partial result of `loom search --shard` "
                                    "(no shard/shards)",
                                    file));
    }
    const strategies::SearchShard shard =
        checked(j["shard"].get<long long>(), j["shards"].get<long long>(),
                fmt::format("{}/{} in {}", j["shard"].dump(), j["shards"].dump(), file));
    if (seen.empty()) {
      count = shard.count;
      seen.resize(static_cast<size_t>(count));
    } else if (shard.count != count) {
      throw ValidationError("--merge",
                            fmt::format("--merge: {} is shard {}/{}, but {} is of {} "
                                        "shards; merge the shards of one split",
                                        file, shard.index, shard.count, files.front(), count));
    }
    std::string& first = seen[static_cast<size_t>(shard.index)];
    if (!first.empty()) {
      throw ValidationError("--merge", fmt::format("--merge: shard {}/{} given twice ({} and {})",
                                                   shard.index, count, first, file));
    }
    first = file;
    const strategies::SearchTally tally = strategies::tally_from_json(text, file, space);
    if (tally.keep_best != options.keep_count() ||
        tally.keep_sample != std::max(0, options.sample)) {
      throw ValidationError(
          "--merge",
          fmt::format(
              "--merge: {} keeps the best {} and a sample of {}, this merge the best {} "
              "and {} (--exact {} --sample {}); merge with the same --exact and --sample as "
              "the shards",
              file, tally.keep_best, tally.keep_sample, options.keep_count(), options.sample,
              options.exact_count(), options.sample));
    }
    strategies::verify_tally(model, space, cluster, options, tally, shard, file);
    merged.merge(tally);
    check_merged_counts(merged, space, file);
  }
  for (int k = 0; k < count; ++k) {
    if (seen[static_cast<size_t>(k)].empty())
      throw ValidationError("--merge",
                            fmt::format("--merge: shard {}/{} is missing; give all {} partial "
                                        "results",
                                        k, count, count));
  }
  return merged;
}

}  // namespace

void add_shard_flags(CLI::App& app, ShardFlags& flags) {
  flags.shard_option = app.add_option("--shard", flags.shard,
                                      "run shard K/N of the fast tier and print its partial "
                                      "result (alone: K and N from the Slurm job array)")
                           ->expected(0, 1);
  auto* merge =
      app.add_option("--merge", flags.merge,
                     "merge the partial results of --shard runs (the same flags) and finish");
  flags.shard_option->excludes(merge);
}

strategies::SearchShard parse_shard(const std::string& text) {
  if (text.empty()) {
    const auto id = env_integer("SLURM_ARRAY_TASK_ID");
    const auto count = env_integer("SLURM_ARRAY_TASK_COUNT");
    if (!id || !count) {
      throw ValidationError("--shard",
                            "--shard: no K/N given, and SLURM_ARRAY_TASK_ID / "
                            "SLURM_ARRAY_TASK_COUNT are not set (not a Slurm job array task); "
                            "give --shard K/N with 0 <= K < N");
    }
    const long long first = env_integer("SLURM_ARRAY_TASK_MIN").value_or(0);
    return checked(*id - first, *count,
                   fmt::format("{} (from SLURM_ARRAY_TASK_ID {} - SLURM_ARRAY_TASK_MIN {}, "
                               "SLURM_ARRAY_TASK_COUNT {})",
                               *id - first, *id, first, *count));
  }
  const auto slash = text.find('/');
  const auto index = whole_number(std::string_view(text).substr(0, slash));
  const auto count = slash == std::string::npos
                         ? std::nullopt
                         : whole_number(std::string_view(text).substr(slash + 1));
  if (!index || !count) throw ValidationError::bad_value("--shard", text, SHARD_HELP);
  return checked(*index, *count, text);
}

std::optional<strategies::SearchResult> run_sharded_search(const models::ModelSpec& model,
                                                           const strategies::SearchSpace& space,
                                                           const topo::Cluster& cluster,
                                                           const strategies::SearchOptions& options,
                                                           const ShardFlags& flags,
                                                           std::ostream& partial_out) {
  if (flags.shard_given()) {
    const strategies::SearchShard shard = parse_shard(flags.shard);
    strategies::SearchOptions quiet = options;
    quiet.progress = nullptr;
    partial_out << partial_json(strategies::fast_tier(model, space, cluster, quiet, shard), space,
                                shard);
    return std::nullopt;
  }
  if (!flags.merge.empty())
    return strategies::finish_search(model, space, cluster,
                                     merge_partials(flags.merge, model, space, cluster, options),
                                     options);
  MpiWorld world;
  if (world.size() == 1) return strategies::run_search(model, space, cluster, options);
  // Every rank: its shard of the fast tier, gathered as JSON at rank 0.
  std::string mine;
  try {
    strategies::SearchOptions quiet = options;
    if (world.rank() != 0) quiet.progress = nullptr;
    const strategies::SearchShard shard{world.rank(), world.size()};
    mine = strategies::tally_to_json(strategies::fast_tier(model, space, cluster, quiet, shard),
                                     space);
  } catch (const Error& e) {
    std::cerr << error_line(fmt::format("error (rank {})", world.rank()), e.what());
    world.abort(static_cast<int>(e.exit_code()));
  } catch (const std::exception& e) {
    std::cerr << error_line(fmt::format("internal error (rank {})", world.rank()), e.what());
    world.abort(static_cast<int>(ExitCode::INTERNAL));
  }
  const std::vector<std::string> tallies = world.gather(mine);
  const int rank = world.rank();
  world.finalize();
  if (rank != 0) return std::nullopt;
  strategies::SearchTally merged;
  for (size_t k = 0; k < tallies.size(); ++k)
    merged.merge(strategies::tally_from_json(tallies[k], fmt::format("rank {}", k), space));
  return strategies::finish_search(model, space, cluster, std::move(merged), options);
}

int default_search_threads() {
  const unsigned hw = std::thread::hardware_concurrency();
  const int cores = static_cast<int>(hw > 0 ? hw : 1);
  return std::max(1, cores / MpiWorld::local_size());
}

}  // namespace loom::cli
