// `search` and `plan` train the model's own sequence length unless --seq is given, as
// `simulate` and `memory` do (issue: they used 2048 for every model, so the answer was for
// another workload). Checked on a Llama preset (Llama 3 8B: 8192, Meta's config.json) and an
// HF config.json (max_position_embeddings 8192; loom's HF import trains 4096 unless told).
// Runs the loom binary.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <string>

#include "tests/cli/cli_run.hpp"
#include "tests/source_path.hpp"

using loom::testing::source_path;
using Json = nlohmann::json;

namespace {

Json run_json(const std::string& args) {
  const loom::testing::TempDir dir("search_seq");
  const loom::testing::Run run = loom::testing::run_loom(dir, args + " --format json");
  REQUIRE_MESSAGE(run.status == 0, run.err);
  return Json::parse(run.out);
}

}  // namespace

TEST_CASE("cli::SearchSeq: search and plan use the model's own sequence length, as simulate") {
  for (const std::string& model :
       {std::string("llama3-8b"), source_path("examples/models/hf/llama3-8b/config.json")}) {
    CAPTURE(model);
    const std::string fixed = " --model " + model + " --gbs 64 --tp 8 --pp 1";
    const std::int64_t simulated =
        run_json("simulate --cluster dgx-h100 --nodes 2" + fixed)["context"]["plan"]["seq"];
    const Json searched =
        run_json("search --cluster dgx-h100 --nodes 2 --top 1 --exact 1" + fixed)["results"];
    REQUIRE(!searched["plans"].empty());
    CHECK(searched["plans"][0]["plan"]["seq"] == simulated);
    const Json planned =
        run_json("plan --gpu h100 --gpus 16 --tokens 1e9 --exact 1" + fixed)["results"];
    REQUIRE(!planned["configurations"].empty());
    CHECK(planned["configurations"][0]["plan"]["seq"] == simulated);
    if (model == "llama3-8b") CHECK(simulated == 8192);
    // --seq still sets it.
    const Json given = run_json("search --cluster dgx-h100 --nodes 2 --top 1 --exact 1 --seq 2048" +
                                fixed)["results"];
    CHECK(given["plans"][0]["plan"]["seq"] == 2048);
  }
}
