// `loom simulate --ops`: the op lists of a plan in the three formats, and the flags it refuses.
// Runs the loom binary.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <string>

#include "tests/harness/run_loom.hpp"

using loom::testing::run_loom;

namespace {

const std::string MIXTRAL =
    "simulate --model mixtral-8x7b --cluster dgx-h100 --nodes 4 --dp 32 --ep 8 --seq 4096 --zero 1 "
    "--recompute full --ops";  // fits: no warning on the merged stderr

}  // namespace

TEST_CASE("cli --ops: a table per distinct op list, the expert exchange named") {
  const auto run = run_loom(MIXTRAL);
  REQUIRE(run.status == 0);
  CHECK(run.out.find("embedding:") != std::string::npos);
  CHECK(run.out.find("layer 0 (moe) x 32:") != std::string::npos);  // Mixtral: 32 MoE layers
  CHECK(run.out.find("expert_up") != std::string::npos);
  CHECK(run.out.find("ep_all_to_all") != std::string::npos);
  CHECK(run.out.find("head:") != std::string::npos);
  // The fused attention's softmax runs inside the attention kernels: no row of its own.
  CHECK(run.out.find("attn_softmax") == std::string::npos);
}

TEST_CASE("cli --ops --format json: each list's kernel seconds are its ops' sums") {
  const auto run = run_loom(MIXTRAL + " --format json");
  REQUIRE(run.status == 0);
  const auto doc = nlohmann::json::parse(run.out);
  const auto& lists = doc.at("results").at("op_lists");
  REQUIRE(lists.size() == 3);
  CHECK(lists[1].at("alike") == 32);
  for (const auto& l : lists) {
    double fwd = 0, bwd = 0;
    for (const auto& o : l.at("ops")) {
      fwd += o.at("forward_s").get<double>();
      bwd += o.at("backward_input_s").get<double>() + o.at("backward_weight_s").get<double>();
    }
    CHECK(l.at("forward_kernel_s").get<double>() == doctest::Approx(fwd).epsilon(1e-12));
    CHECK(l.at("backward_kernel_s").get<double>() == doctest::Approx(bwd).epsilon(1e-12));
    CHECK(l.at("forward_s").get<double>() >= l.at("forward_kernel_s").get<double>());
    for (const auto& o : l.at("ops"))
      if (o.at("kind") == "matmul") CHECK(o.at("forward_flops").get<double>() > 0);
  }
}

TEST_CASE("cli --ops --format csv: one record per op under one header") {
  const auto run = run_loom(MIXTRAL + " --format csv");
  REQUIRE(run.status == 0);
  const auto json = run_loom(MIXTRAL + " --format json");
  const auto lists = nlohmann::json::parse(json.out).at("results").at("op_lists");
  size_t ops = 0;
  for (const auto& l : lists) ops += l.at("ops").size();
  size_t lines = 0;
  for (char c : run.out) lines += c == '\n';
  CHECK(lines == ops + 1);
  CHECK(run.out.rfind("schema,gpu,list,alike,op,kind,forward_s,", 0) == 0);
  CHECK(run.out.find("\nloom.simulate-ops.v1,") != std::string::npos);
}

TEST_CASE("cli --ops: a plan that does not fit is warned about in every format") {
  // Llama 3 8B unsharded on 8 H100s: about 179 GiB on each 80 GB GPU.
  for (const char* format : {"table", "json", "csv"}) {
    CAPTURE(format);
    const auto run =
        run_loom(std::string("simulate --model llama3-8b --cluster dgx-h100 --nodes 1 --dp 8 --ops "
                             "--format ") +
                 format);
    CHECK(run.status == 0);
    CHECK(run.out.find("loom: warning: the plan does not fit") != std::string::npos);
  }
}

TEST_CASE("cli --ops: what it does not simulate is refused, exit 2") {
  for (const char* other : {" --trace /tmp/loom-ops-trace.json", " --steps 3", " --full",
                            " --compare zero=1", " --network ideal"}) {
    CAPTURE(other);
    const auto run = run_loom(MIXTRAL + other);
    CHECK(run.status == 2);
    CHECK(run.out.find("--ops") != std::string::npos);
  }
}
