// Fuzz target: a HuggingFace config.json through the importer, then the parameter count and
// the memory model of the model under the default plan.
#include "models/model_loader.hpp"
#include "strategies/memory_plan.hpp"
#include "tests/fuzz/fuzz_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return loom::fuzz::guarded([&] {
    const loom::models::ModelSpec model =
        loom::models::import_hf_config(loom::fuzz::text_of(data, size), "config.json");
    (void)loom::models::count_parameters(model);
    (void)loom::strategies::estimate_memory(model, loom::models::TrainingPlan{});
  });
}
