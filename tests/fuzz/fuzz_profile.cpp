// Fuzz target: a loom calibration profile (--calibration, `calibrate show`), then its
// measured kernel tables and each collective table interpolated at a few sizes.
#include "sim/calibration/profile.hpp"
#include "tests/fuzz/fuzz_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return loom::fuzz::guarded([&] {
    const loom::calibration::Profile profile =
        loom::calibration::parse_profile(loom::fuzz::text_of(data, size), "fuzz-profile.json");
    (void)loom::calibration::measured_kernels(profile);
    for (const auto& table : profile.collectives)
      for (double bytes : {1.0, 1e3, 1e6, 1e9}) (void)loom::calibration::interpolate(table, bytes);
  });
}
