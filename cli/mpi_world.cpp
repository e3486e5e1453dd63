#include "cli/mpi_world.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <limits>

#include "common/error.hpp"

#ifdef LOOM_HAVE_MPI
#include <mpi.h>
#endif

namespace loom::cli {
namespace {

// A launcher's count of ranks: at least 1.
int rank_count(long long n) {
  return static_cast<int>(std::clamp<long long>(n, 1, std::numeric_limits<int>::max()));
}

// The world size an MPI launcher announces in the environment (mpirun: OMPI_COMM_WORLD_SIZE;
// MPICH's hydra and Slurm's PMI-2: PMI_SIZE); 1 without one.
int launched_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const auto n = env_integer(name)) return rank_count(*n);
  return 1;
}

}  // namespace

std::optional<long long> whole_number(std::string_view text) {
  long long number = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return number;
}

std::optional<long long> env_integer(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::nullopt : whole_number(value);
}

int MpiWorld::local_size() {
  return rank_count(env_integer("OMPI_COMM_WORLD_LOCAL_SIZE").value_or(1));
}

#ifdef LOOM_HAVE_MPI

MpiWorld::MpiWorld() {
  if (launched_size() <= 1) return;
  int provided = 0;
  // Only the calling thread talks to MPI; the search's worker threads never do.
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  active_ = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiWorld::~MpiWorld() {
  finalize();
}

void MpiWorld::finalize() {
  if (!active_) return;
  active_ = false;
  MPI_Finalize();
}

std::vector<std::string> MpiWorld::gather(const std::string& text) const {
  if (!active_) return {text};
  const int length = static_cast<int>(text.size());
  std::vector<int> lengths(rank_ == 0 ? static_cast<size_t>(size_) : 0);
  MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<int> offsets(lengths.size());
  int total = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    offsets[i] = total;
    total += lengths[i];
  }
  std::string all(static_cast<size_t>(total), '\0');
  MPI_Gatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR,
              0, MPI_COMM_WORLD);
  std::vector<std::string> out;
  for (size_t i = 0; i < lengths.size(); ++i)
    out.push_back(all.substr(static_cast<size_t>(offsets[i]), static_cast<size_t>(lengths[i])));
  return out;
}

void MpiWorld::abort(int code) const {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);  // MPI_Abort does not return; this keeps [[noreturn]] honest
}

#else

MpiWorld::MpiWorld() {
  const int size = launched_size();
  if (size > 1) {
    throw ValidationError(
        "mpirun", fmt::format("mpirun: started as one of {} ranks, but this loom was built "
                              "without MPI; install libopenmpi-dev (scripts/setup) and rebuild, "
                              "or shard with --shard K/N and --merge (docs/search.md)",
                              size));
  }
}

MpiWorld::~MpiWorld() = default;

void MpiWorld::finalize() {}

std::vector<std::string> MpiWorld::gather(const std::string& text) const {
  return {text};
}

void MpiWorld::abort(int code) const {
  std::exit(code);
}

#endif

}  // namespace loom::cli
