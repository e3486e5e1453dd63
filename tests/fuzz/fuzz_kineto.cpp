// Fuzz target: a PyTorch profiler (Kineto) Chrome trace, gzip-compressed or not, through
// the importer that `loom calibrate import` uses.
#include <string>
#include <vector>

#include "sim/calibration/gzip.hpp"
#include "sim/calibration/kineto.hpp"
#include "tests/fuzz/fuzz_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return loom::fuzz::guarded([&] {
    std::string text = loom::fuzz::text_of(data, size);
    if (loom::calibration::is_gzip(text))
      text = loom::calibration::gunzip(text, "fuzz.json.gz", loom::MAX_MEASUREMENT_FILE_BYTES);
    std::vector<std::string> notes;
    (void)loom::calibration::parse_kineto(text, "fuzz-trace.json", notes);
  });
}
