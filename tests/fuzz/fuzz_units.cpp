// Fuzz target: a quantity with its unit ("80GiB", "900GBps", "1.5us", "989TFLOPS"), as flags
// and every input file give sizes, bandwidths, times and rates; parsed as each kind.
#include "common/units.hpp"
#include "tests/fuzz/fuzz_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = loom::fuzz::text_of(data, size);
  for (loom::Unit unit : {loom::Unit::BYTES, loom::Unit::BANDWIDTH, loom::Unit::TIME,
                          loom::Unit::FLOP_RATE, loom::Unit::FLOPS}) {
    loom::fuzz::guarded([&] { (void)loom::parse_quantity(text, unit, "--size"); });
  }
  return 0;
}
