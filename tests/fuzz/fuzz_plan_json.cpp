// Fuzz target: a loom plan JSON file (--plan), resolved, validated and sized (fuzz_plan.hpp).
#include "tests/fuzz/fuzz_plan.hpp"
#include "tests/fuzz/fuzz_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return loom::fuzz::guarded([&] {
    loom::fuzz::use_plan(
        loom::strategies::parse_plan_json(loom::fuzz::text_of(data, size), "fuzz-plan.json"));
  });
}
