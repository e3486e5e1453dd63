// Fuzz target: an nccl-tests log (all_reduce_perf, ...) through the importer, then each
// table interpolated at a few sizes as the engine's override would.
#include "sim/calibration/nccl_tests.hpp"
#include "sim/calibration/profile.hpp"
#include "tests/fuzz/fuzz_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return loom::fuzz::guarded([&] {
    const loom::calibration::ImportResult result =
        loom::calibration::parse_nccl_tests(loom::fuzz::text_of(data, size), "fuzz.log");
    for (const auto& table : result.tables)
      for (double bytes : {1.0, 1e3, 1e6, 1e9}) (void)loom::calibration::interpolate(table, bytes);
  });
}
