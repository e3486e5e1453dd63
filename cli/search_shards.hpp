#pragma once
// `loom search` beyond one process. Three ways to split the fast tier over the space's shapes
// (strategies::SearchShard: shape index mod N = K) and merge the tallies exactly:
//  - MPI: under `mpirun -np N`, rank K runs shard K/N, rank 0 gathers the tallies (their
//    JSON), merges them and runs the exact tier; the other ranks print nothing.
//  - Slurm job arrays: `--shard K/N` (or `--shard` alone: K and N from SLURM_ARRAY_TASK_ID -
//    SLURM_ARRAY_TASK_MIN and SLURM_ARRAY_TASK_COUNT) prints shard K's partial result (the
//    tally JSON with the shard named) instead of the answer;
//  - `--merge FILES...` reads the N partial results of one search (the same model, cluster
//    and flags), checks that they are shards 0 .. N-1 once each, merges them and runs the
//    exact tier.
// Each prints exactly what the single-process search prints. docs/search.md, "Sharding".
#include <CLI/CLI.hpp>

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "strategies/search/search.hpp"

namespace loom::cli {

/// Raw values of --shard and --merge.
struct ShardFlags {
  std::string shard;                    ///< "K/N", or "" for the Slurm defaults
  std::vector<std::string> merge;       ///< partial result files
  CLI::Option* shard_option = nullptr;  ///< set by add_shard_flags
  /// Whether --shard was given, with or without a value.
  bool shard_given() const { return shard_option != nullptr && shard_option->count() > 0; }
};

/// Adds --shard [K/N] and --merge FILES... to `app`.
void add_shard_flags(CLI::App& app, ShardFlags& flags);

/// "K/N" as a shard (0 <= K < N); "" from SLURM_ARRAY_TASK_ID, SLURM_ARRAY_TASK_MIN and
/// SLURM_ARRAY_TASK_COUNT. Throws ValidationError naming --shard.
strategies::SearchShard parse_shard(const std::string& text);

/// The search as the flags and the launcher ask (see file comment). Returns the answer to
/// print, or nullopt when this process prints nothing more (an MPI rank other than 0) or has
/// written its partial result to `partial_out` (--shard). Throws what run_search throws, and
/// ValidationError / ConfigError for bad shards or partial results.
std::optional<strategies::SearchResult> run_sharded_search(const models::ModelSpec& model,
                                                           const strategies::SearchSpace& space,
                                                           const topo::Cluster& cluster,
                                                           const strategies::SearchOptions& options,
                                                           const ShardFlags& flags,
                                                           std::ostream& partial_out);

/// Worker threads per process when --threads is not given: the hardware's, shared among the
/// MPI ranks on this node.
int default_search_threads();

}  // namespace loom::cli
