// `loom-harness nccl`: NCCL collectives in one process driving every GPU it uses
// (ncclCommInitAll), on groups of 1, 2, 4, ... GPUs and all of them. Sizes follow nccl-tests
// ("size" is the total buffer: all-gather's output, reduce-scatter's input), FP32 elements,
// out-of-place then in-place. All-to-all (grouped ncclSend/ncclRecv to every peer) and
// send/recv (rank r sends to r+1) have no in-place form: their in-place column repeats the
// out-of-place time. Timing as nccl-tests: each sample is a loop of --loop back-to-back
// grouped launches between CUDA events on every rank's stream; the slowest rank's loop over
// its launches is the sample (cuda_util.hpp time_loop).
#include <nccl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <set>

#ifdef LOOM_HARNESS_MPI
#include <mpi.h>
#endif

#include <fstream>

#include "harness/cuda_util.hpp"
#include "harness/measure.hpp"
#include "harness/nccl_tests_format.hpp"

namespace loom::harness {

namespace {

void check_nccl(ncclResult_t status, const char* what) {
  if (status == ncclSuccess) return;
  throw DeviceError(fmt::format("{}: NCCL failed: {} (run with NCCL_DEBUG=WARN for the cause)",
                                what, ncclGetErrorString(status)));
}

// One rank's buffers and stream; `rank` its place in the communicator.
struct Rank {
  int rank = 0;
  int device = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
};

// Enqueues one collective of `count` elements on every rank (count as nccl-tests passes it:
// per rank for all-gather, per output for reduce-scatter, per peer for all-to-all).
// `ranks` are this process's ranks of a communicator of `g`.
void launch(const std::string& op, std::vector<Rank>& ranks, int g, size_t count, bool in_place) {
  check_nccl(ncclGroupStart(), "ncclGroupStart");
  for (Rank& k : ranks) {
    const int r = k.rank;
    auto* send = static_cast<float*>(k.send);
    auto* recv = static_cast<float*>(k.recv);
    if (op == "all_reduce") {
      check_nccl(
          ncclAllReduce(send, in_place ? send : recv, count, ncclFloat, ncclSum, k.comm, k.stream),
          "ncclAllReduce");
    } else if (op == "all_gather") {
      check_nccl(ncclAllGather(in_place ? recv + r * count : send, recv, count, ncclFloat, k.comm,
                               k.stream),
                 "ncclAllGather");
    } else if (op == "reduce_scatter") {
      check_nccl(ncclReduceScatter(send, in_place ? send + r * count : recv, count, ncclFloat,
                                   ncclSum, k.comm, k.stream),
                 "ncclReduceScatter");
    } else if (op == "broadcast") {
      check_nccl(ncclBroadcast(send, in_place ? send : recv, count, ncclFloat, 0, k.comm, k.stream),
                 "ncclBroadcast");
    } else if (op == "all_to_all") {
      for (int peer = 0; peer < g; ++peer) {
        check_nccl(ncclSend(send + peer * count, count, ncclFloat, peer, k.comm, k.stream),
                   "ncclSend");
        check_nccl(ncclRecv(recv + peer * count, count, ncclFloat, peer, k.comm, k.stream),
                   "ncclRecv");
      }
    } else {  // send_recv: a ring of point-to-point transfers
      check_nccl(ncclSend(send, count, ncclFloat, (r + 1) % g, k.comm, k.stream), "ncclSend");
      check_nccl(ncclRecv(recv, count, ncclFloat, (r + g - 1) % g, k.comm, k.stream), "ncclRecv");
    }
  }
  check_nccl(ncclGroupEnd(), op.c_str());
}

// Elements per call for a total size of `bytes` on `g` ranks, rounded as nccl-tests does.
size_t count_for(const std::string& op, std::int64_t bytes, int g) {
  const size_t total = static_cast<size_t>(bytes) / sizeof(float);
  const bool split = op == "all_gather" || op == "reduce_scatter" || op == "all_to_all";
  return split ? total / static_cast<size_t>(g) : total;
}

// Every op and size on a communicator of `g` ranks over `nodes` hosts, of which this process
// drives `ranks`; `slowest` turns this process's samples into the slowest rank's (the
// identity in one process, a maximum over processes under MPI).
template <typename Slowest>
std::vector<CollectiveResult> measure_group(std::vector<Rank>& ranks, int g, int nodes,
                                            const Options& options, Slowest&& slowest) {
  std::vector<cudaStream_t> streams;
  std::vector<int> devices;
  for (const Rank& k : ranks) {
    streams.push_back(k.stream);
    devices.push_back(k.device);
  }
  std::vector<CollectiveResult> results;
  for (const std::string& op : options.ops) {
    std::vector<CollectiveResult> rows;
    for (std::int64_t bytes = options.min_bytes; bytes <= options.max_bytes; bytes *= 2) {
      const size_t count = count_for(op, bytes, g);
      if (count == 0) continue;
      const bool split = op == "all_gather" || op == "reduce_scatter" || op == "all_to_all";
      CollectiveResult r;
      r.op = op;
      r.group_size = g;
      r.nodes = nodes;
      r.bytes = static_cast<std::int64_t>(count * (split ? g : 1) * sizeof(float));
      r.count = static_cast<std::int64_t>(count);
      auto timed = [&](bool in_place) {
        return summarize(slowest(
            time_loop([&] { launch(op, ranks, g, count, in_place); }, streams, devices, options)));
      };
      r.out_of_place = timed(false);
      const bool has_in_place = op != "all_to_all" && op != "send_recv";
      r.in_place = has_in_place ? timed(true) : r.out_of_place;
      for (Rank& k : ranks) {
        check_cuda(cudaSetDevice(k.device), "cudaSetDevice");
        check_cuda(cudaStreamSynchronize(k.stream), op.c_str());
      }
      rows.push_back(r);
    }
    results.insert(results.end(), rows.begin(), rows.end());
  }
  return results;
}

// Group sizes measured on `n` GPUs: 1, 2, 4, ... and n.
std::vector<int> group_sizes(int n) {
  std::vector<int> sizes;
  for (int g = 1; g < n; g *= 2) sizes.push_back(g);
  sizes.push_back(n);
  return sizes;
}

}  // namespace

std::vector<CollectiveResult> measure_nccl(const Options& options) {
  const std::vector<std::string> names = gpu_names();
  const int available = static_cast<int>(names.size());
  if (options.gpus > available) {
    throw DeviceError(fmt::format("-g {}: this machine has {} GPU(s); give -g {} or fewer",
                                  options.gpus, available, available));
  }
  const int n = options.gpus > 0 ? options.gpus : available;
  const size_t buffer = static_cast<size_t>(options.max_bytes) + 64;
  std::vector<CollectiveResult> results;
  for (int g : group_sizes(n)) {
    std::vector<Rank> ranks(static_cast<size_t>(g));
    std::vector<ncclComm_t> comms(static_cast<size_t>(g));
    std::vector<int> devices;
    for (int d = 0; d < g; ++d) devices.push_back(d);
    check_nccl(ncclCommInitAll(comms.data(), g, devices.data()),
               fmt::format("ncclCommInitAll on {} GPU(s)", g).c_str());
    for (int d = 0; d < g; ++d) {
      Rank& k = ranks[static_cast<size_t>(d)];
      k.rank = d;
      k.device = d;
      k.comm = comms[static_cast<size_t>(d)];
      check_cuda(cudaSetDevice(d), "cudaSetDevice");
      check_cuda(cudaStreamCreate(&k.stream), "cudaStreamCreate");
      check_cuda(cudaMalloc(&k.send, buffer), "NCCL send buffer (lower -e)");
      check_cuda(cudaMalloc(&k.recv, buffer), "NCCL receive buffer (lower -e)");
      check_cuda(cudaMemset(k.send, 0, buffer), "cudaMemset");
    }
    std::vector<CollectiveResult> rows =
        measure_group(ranks, g, 1, options, [](std::vector<double> s) { return s; });
    for (Rank& k : ranks) {
      cudaSetDevice(k.device);
      cudaFree(k.send);
      cudaFree(k.recv);
      cudaStreamDestroy(k.stream);
      ncclCommDestroy(k.comm);
    }
    results.insert(results.end(), rows.begin(), rows.end());
  }
  return results;
}

int launched_ranks() {
  // The world size an MPI launcher announces: Open MPI's mpirun, MPICH's hydra and Slurm's
  // PMI-2 (PMI_SIZE), Slurm's srun (SLURM_NTASKS).
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS"}) {
    if (const char* value = std::getenv(name)) {
      const int n = std::atoi(value);
      if (n > 0) return n;
    }
  }
  return 1;
}

#ifdef LOOM_HARNESS_MPI

namespace {

void check_mpi(int status, const char* what) {
  if (status != MPI_SUCCESS) throw DeviceError(fmt::format("{}: MPI failed ({})", what, status));
}

// This rank's (host, device, GPU name) gathered on rank 0, in rank order.
std::vector<RankDevice> gather_ranks(const RankDevice& mine, int rank, int size) {
  constexpr int FIELD = 256;
  char row[2 * FIELD] = {};
  std::snprintf(row, FIELD, "%s", mine.host.c_str());
  std::snprintf(row + FIELD, FIELD, "%d %s", mine.device, mine.name.c_str());
  std::vector<char> all(rank == 0 ? static_cast<size_t>(size) * sizeof row : 0);
  check_mpi(
      MPI_Gather(row, sizeof row, MPI_CHAR, all.data(), sizeof row, MPI_CHAR, 0, MPI_COMM_WORLD),
      "MPI_Gather of the ranks' devices");
  std::vector<RankDevice> ranks;
  for (int r = 0; r < (rank == 0 ? size : 0); ++r) {
    const char* at = all.data() + static_cast<size_t>(r) * sizeof row;
    RankDevice d;
    d.host = at;
    char* name = nullptr;
    d.device = static_cast<int>(std::strtol(at + FIELD, &name, 10));
    d.name = name != nullptr && *name == ' ' ? name + 1 : "";
    ranks.push_back(d);
  }
  return ranks;
}

}  // namespace

MpiCollectives measure_nccl_mpi(const Options& options) {
  int provided = 0;
  check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init");
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // One GPU per process: the process's place among those of its host.
  MPI_Comm local;
  check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local),
            "MPI_Comm_split_type");
  int local_rank = 0;
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_free(&local);
  const std::vector<std::string> names = gpu_names();
  const int device = local_rank % static_cast<int>(names.size());
  check_cuda(cudaSetDevice(device), "cudaSetDevice");

  char host[256] = {};
  gethostname(host, sizeof host - 1);
  MpiCollectives out;
  out.root = rank == 0;
  out.ranks = gather_ranks({host, device, names[static_cast<size_t>(device)]}, rank, size);
  int nodes = 0;
  if (out.root) {
    std::set<std::string> hosts;
    for (const RankDevice& r : out.ranks) hosts.insert(r.host);
    nodes = static_cast<int>(hosts.size());
  }
  check_mpi(MPI_Bcast(&nodes, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast of the node count");

  // The communicator: rank 0's unique id broadcast over MPI, ncclCommInitRank everywhere.
  ncclUniqueId id;
  if (out.root) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  check_mpi(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast of the NCCL id");
  std::vector<Rank> mine(1);
  Rank& k = mine[0];
  k.rank = rank;
  k.device = device;
  check_nccl(ncclCommInitRank(&k.comm, size, id, rank),
             fmt::format("ncclCommInitRank {} of {}", rank, size).c_str());
  const size_t buffer = static_cast<size_t>(options.max_bytes) + 64;
  check_cuda(cudaStreamCreate(&k.stream), "cudaStreamCreate");
  check_cuda(cudaMalloc(&k.send, buffer), "NCCL send buffer (lower -e)");
  check_cuda(cudaMalloc(&k.recv, buffer), "NCCL receive buffer (lower -e)");
  check_cuda(cudaMemset(k.send, 0, buffer), "cudaMemset");
  // Each sample is the slowest rank's, as nccl-tests reports the maximum over ranks.
  auto slowest = [](std::vector<double> seconds) {
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, seconds.data(), static_cast<int>(seconds.size()),
                            MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
              "MPI_Allreduce of the samples");
    return seconds;
  };
  out.results = measure_group(mine, size, nodes, options, slowest);
  cudaFree(k.send);
  cudaFree(k.recv);
  cudaStreamDestroy(k.stream);
  ncclCommDestroy(k.comm);
  MPI_Finalize();
  return out;
}

#else

MpiCollectives measure_nccl_mpi(const Options&) {
  throw DeviceError(
      "launched as one of several MPI ranks, but this loom-harness was built without MPI: "
      "install an MPI (libopenmpi-dev) and rebuild, or run one process per node without mpirun");
}

#endif

}  // namespace loom::harness
