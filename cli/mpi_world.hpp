#pragma once
// The MPI world `mpirun -np N loom search` runs in. loom links MPI only when CMake found it
// (LOOM_WITH_MPI, the default when libopenmpi-dev is installed); MPI is initialised only when
// an MPI launcher started this process among more than one rank (OMPI_COMM_WORLD_SIZE,
// PMI_SIZE), so a plain `loom` run never touches MPI. No MPI header here: mpi_world.cpp
// holds both builds. The launchers' numbers are read from the environment in one way
// (env_integer), here and for --shard's Slurm array defaults.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loom::cli {

/// `text` as a whole number; nullopt when it is not one (empty, trailing characters, out of
/// range).
std::optional<long long> whole_number(std::string_view text);
/// The whole number in environment variable `name`, as launchers announce them (mpirun's
/// OMPI_COMM_WORLD_SIZE, Slurm's SLURM_ARRAY_TASK_ID); nullopt when it is unset or not one.
std::optional<long long> env_integer(const char* name);

/// This process's place among the ranks of an MPI launch (rank 0 of 1 without one).
class MpiWorld {
 public:
  /// Joins the launch's world: MPI_Init_thread when a launcher started more than one rank.
  /// Throws ValidationError when it did and this loom was built without MPI.
  MpiWorld();
  /// Finalizes MPI if it is still initialised.
  ~MpiWorld();
  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;

  /// This process's rank, 0 .. size() - 1.
  int rank() const { return rank_; }
  /// Ranks in the world; 1 without an MPI launch.
  int size() const { return size_; }
  /// Every rank's `text` at rank 0, in rank order; empty on the other ranks. Collective.
  std::vector<std::string> gather(const std::string& text) const;
  /// Ends MPI on this rank (collective); later calls do nothing.
  void finalize();
  /// Ends every rank with exit code `code` after an error on this one (MPI_Abort).
  [[noreturn]] void abort(int code) const;
  /// Ranks the launcher started on this node (OMPI_COMM_WORLD_LOCAL_SIZE), 1 without one.
  static int local_size();

 private:
  int rank_ = 0;
  int size_ = 1;
  bool active_ = false;
};

}  // namespace loom::cli
