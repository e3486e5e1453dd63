// Fuzz target: a runs file of `loom calibrate fit --runs` (measured training runs in the
// reference schema, docs/calibration.md "Runs file"), read as the command reads it, then each
// run's cluster built when it is small (at most 64 GPUs: larger ones are legal and slow by
// design). read_runs takes a path, so the input goes through a file of this process's own.
#include <unistd.h>

#include <fstream>
#include <string>

#include "strategies/calibration/run_records.hpp"
#include "tests/fuzz/fuzz_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = "/tmp/loom_fuzz_runs_" + std::to_string(::getpid()) + ".json";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  return loom::fuzz::guarded([&] {
    const auto runs = loom::strategies::read_runs(path, std::string("dgx-h100"), 2);
    for (const auto& run : runs) {
      if (run.cluster != nullptr || run.gpus <= 64) (void)run.cluster_ref();
    }
  });
}
