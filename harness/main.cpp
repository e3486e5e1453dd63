// loom-harness: measures this machine's GPUs and writes a loom calibration profile
// (harness/README.md). Options, statistics, the profile and the nccl-tests table live in
// loom_harness_core (plain C++, tested without a GPU); the measuring is in measure.hpp.
#include <unistd.h>

#include <fstream>
#include <iostream>

#include "harness/errors.hpp"
#include "harness/measure.hpp"
#include "harness/nccl_tests_format.hpp"

namespace {

using namespace loom::harness;

std::string host_name() {
  char name[256] = {};
  return gethostname(name, sizeof name - 1) == 0 ? name : "localhost";
}

// Returns false on the MPI ranks other than 0, which measure but do not report.
bool run_nccl(HarnessProfile& profile, const Options& options) {
  std::vector<RankDevice> ranks;
  if (launched_ranks() > 1) {
    MpiCollectives world = measure_nccl_mpi(options);
    if (!world.root) return false;
    profile.collectives = std::move(world.results);
    ranks = std::move(world.ranks);
  } else {
    profile.collectives = measure_nccl(options);
    ranks = one_host(gpu_names(), host_name());
  }
  const std::string text = nccl_tests_report(profile.collectives, ranks, options);
  std::cout << text;
  if (!options.nccl_tests_output.empty()) {
    std::ofstream out(options.nccl_tests_output);
    out << text;
    out.close();
    if (!out) {
      throw UsageError(options.nccl_tests_output +
                       ": cannot write the nccl-tests table; check the folder exists");
    }
  }
  return true;
}

int run(const std::vector<std::string>& args) {
  const Options options = parse_options(args);
  if (options.command == Command::HELP) {
    std::cout << usage();
    return 0;
  }
  HarnessProfile profile;
  profile.device = query_device();
  profile.date = utc_now();
  profile.command = "loom-harness";
  for (const std::string& a : args) profile.command += " " + a;
  switch (options.command) {
    case Command::INFO:
      std::cout << device_text(profile.device);
      break;
    case Command::GEMM:
      profile.gemm = measure_gemm(
          options.shapes_file.empty() ? standard_shapes() : read_shapes(options.shapes_file),
          options, profile.clock);
      break;
    case Command::MEMORY:
      profile.memory = measure_memory(options, profile.clock);
      break;
    case Command::LAUNCH:
      profile.launch = measure_launch(options);
      break;
    case Command::NCCL:
      if (!run_nccl(profile, options)) return 0;  // an MPI rank other than 0: rank 0 reports
      break;
    case Command::HELP:
      break;
  }
  if (!options.output.empty()) {
    write_profile(profile, options.output);
    std::cerr << "wrote " << options.output << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const loom::Error& e) {
    std::cerr << "loom-harness: error: " << e.what() << "\n";
    return static_cast<int>(e.exit_code());
  } catch (const std::exception& e) {
    std::cerr << "loom-harness: internal error: " << e.what() << "\n";
    return 1;
  }
}
