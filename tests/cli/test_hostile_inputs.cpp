// Issue 11, items 1-12: inputs that used to crash, hang, exit 1 or print garbage. Each case
// runs the loom binary on the issue's input and expects exit code 2 with exactly one
// printable line on stderr naming the field or the limit (docs/limits.md). Every command
// runs under `timeout`, so a regression that hangs fails instead of stalling the suite.
#include <doctest/doctest.h>
#include <sys/stat.h>  // mkfifo (POSIX)
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/cli/cli_run.hpp"
#include "tests/source_path.hpp"
#include "tests/temp_dir.hpp"

using loom::testing::source_path;

namespace {

using loom::testing::check_bad_input;
using loom::testing::read_all;
using loom::testing::Run;
using loom::testing::run_loom;
using loom::testing::TempDir;
using loom::testing::write;

const std::string MODEL = R"({"layers": 2, "hidden": 256, "heads": 4, "ffn": 1024, "vocab": 1000})";

}  // namespace

TEST_CASE("cli::HostileInputs: 1. deeply nested JSON is rejected, not a stack overflow") {
  const TempDir dir("hostile1");
  const std::string deep = dir.file("deep.json");
  write(deep, std::string(100000, '[') + std::string(100000, ']'));
  check_bad_input(run_loom(dir, "memory --model " + deep + " --gpu h100"), "MAX_JSON_DEPTH");
  check_bad_input(run_loom(dir, "topo --cluster " + deep), "MAX_JSON_DEPTH");
  check_bad_input(run_loom(dir, "memory --model llama3-8b --gpu h100 --plan " + deep),
                  "MAX_JSON_DEPTH");
  check_bad_input(run_loom(dir, "memory --model llama3-8b --gpu h100 --deepspeed " + deep),
                  "MAX_JSON_DEPTH");
  check_bad_input(run_loom(dir, "calibrate show " + deep), "MAX_JSON_DEPTH");
  // Nested just below the limit inside a value: the error quotes a short excerpt.
  const std::string nested = dir.file("nested.json");
  write(nested, R"({"base": "llama3-8b", "layers": )" + std::string(120, '[') +
                    std::string(120, ']') + "}");
  check_bad_input(run_loom(dir, "memory --model " + nested + " --gpu h100"), "/layers");
}

TEST_CASE("cli::HostileInputs: 2. a number beyond a double is bad input, not exit 1") {
  const TempDir dir("hostile2");
  const std::string cluster = dir.file("cluster.json");
  write(cluster, R"({"nodes": 1e400})");
  check_bad_input(run_loom(dir, "topo --cluster " + cluster), "1e400");
  const std::string model = dir.file("model.json");
  write(model, R"({"base": "llama3-8b", "seq": -1e400})");
  check_bad_input(run_loom(dir, "memory --model " + model + " --gpu h100"), "1e400");
}

TEST_CASE("cli::HostileInputs: 3. a very long --model is bad input, not exit 1") {
  const TempDir dir("hostile3");
  const std::string name(5000, 'a');
  check_bad_input(run_loom(dir, "memory --model " + name + " --gpu h100"), "--model");
  // As a path: the message keeps its head and its advice.
  check_bad_input(run_loom(dir, "memory --model /" + name + ".json --gpu h100"), "cannot open");
}

TEST_CASE("cli::HostileInputs: 4. names that are not UTF-8 or hold control characters") {
  const TempDir dir("hostile4");
  // A model or cluster without "name" is named after its file, whose path may hold any byte:
  // the JSON output stays valid UTF-8.
  const std::string model = dir.file("m\xff.json");
  write(model, MODEL);
  Run r = run_loom(dir, "memory --model '" + model + "' --gpu h100 --format json");
  CHECK(r.status == 0);
  CHECK(nlohmann::json::parse(r.out)["context"]["model"] == "m\\xff");
  std::ifstream example(source_path("examples/clusters/custom_4gpu_roce.json"));
  nlohmann::json cluster = nlohmann::json::parse(example);
  cluster.erase("name");
  const std::string cluster_path = dir.file("c\xff.json");
  write(cluster_path, cluster.dump());
  r = run_loom(dir, "topo --cluster '" + cluster_path + "' --format json");
  CHECK(r.status == 0);
  const std::string name = nlohmann::json::parse(r.out)["context"]["cluster"];
  CHECK(name.find("c\\xff.json") != std::string::npos);
  r = run_loom(dir, "simulate --model llama3-8b --cluster '" + cluster_path + "' --format json");
  CHECK(r.status == 0);
  CHECK(nlohmann::json::accept(r.out));
  // A name given with a control character (ESC) is bad input, not raw terminal codes.
  const std::string esc = dir.file("esc.json");
  write(esc, R"({"base": "llama3-8b", "name": "bad\u001b[31mname"})");
  check_bad_input(run_loom(dir, "memory --model " + esc + " --gpu h100"), "/name");
}

TEST_CASE("cli::HostileInputs: 5. buckets below loom's smallest are rejected, not a blow-up") {
  const TempDir dir("hostile5");
  check_bad_input(
      run_loom(dir, "simulate --model llama3-8b --cluster dgx-h100 --dp-bucket-size 0B"),
      "--dp-bucket-size");
  check_bad_input(
      run_loom(dir, "simulate --model llama3-8b --cluster dgx-h100 --dp-bucket-size 1KiB"),
      "--dp-bucket-size");
  check_bad_input(run_loom(dir,
                           "simulate --model llama3-8b --cluster dgx-h100 --megatron-args "
                           "'--ddp-bucket-size 1'"),
                  "--ddp-bucket-size");
  const std::string ds = dir.file("ds.json");
  write(ds, R"({"zero_optimization": {"stage": 2, "reduce_bucket_size": 1}})");
  check_bad_input(run_loom(dir, "simulate --model llama3-8b --cluster dgx-h100 --deepspeed " + ds),
                  "reduce_bucket_size");
  write(ds, R"({"zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 1}})");
  check_bad_input(run_loom(dir, "simulate --model llama3-8b --cluster dgx-h100 --deepspeed " + ds),
                  "stage3_prefetch_bucket_size");
  // The smallest allowed bucket still runs.
  CHECK(run_loom(dir, "memory --model llama3-8b --gpu h100 --dp 8 --dp-bucket-size 64KiB").status ==
        0);
}

TEST_CASE("cli::HostileInputs: 6. micro-batch counts and sizes are bounded, not truncated") {
  const TempDir dir("hostile6");
  check_bad_input(run_loom(dir, "simulate --model llama3-8b --cluster dgx-h100 --gbs 34359738376"),
                  "MAX_MICRO_BATCHES");
  check_bad_input(run_loom(dir, "memory --model llama3-8b --gpu h100 --gbs 34359738376"), "--gbs");
  check_bad_input(run_loom(dir, "simulate --model llama3-8b --cluster dgx-h100 --mbs 1073741823"),
                  "--mbs");
  const Run r = run_loom(dir, "simulate --model llama3-8b --cluster dgx-h100 --mbs 1073741823");
  CHECK(r.err.find("MAX_MICRO_BATCH_TOKENS") != std::string::npos);
}

TEST_CASE("cli::HostileInputs: 7. a pipeline split beyond int is rejected, not wrapped") {
  const TempDir dir("hostile7");
  check_bad_input(run_loom(dir,
                           "memory --model llama3-8b --gpu h100 --pp 2 --pipeline-split "
                           "4294967296,32"),
                  "--pipeline-split");
  check_bad_input(run_loom(dir,
                           "memory --model llama3-8b --gpu h100 --pp 2 --pipeline-split "
                           "2147483647,2147483647"),
                  "--pipeline-split");
}

TEST_CASE("cli::HostileInputs: 8. input files are bounded regular files") {
  const TempDir dir("hostile8");
  check_bad_input(run_loom(dir, "memory --model /dev/zero --gpu h100"), "not a regular file");
  const std::string fifo = dir.file("fifo.json");
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  check_bad_input(run_loom(dir, "memory --model " + fifo + " --gpu h100"), "not a regular file");
  // Over the limit: a sparse file, so the test writes nothing to disk.
  const std::string big = dir.file("big.json");
  write(big, "[");
  std::filesystem::resize_file(big, (std::uintmax_t{16} << 20) + 1);
  check_bad_input(run_loom(dir, "memory --model " + big + " --gpu h100"), "MAX_CONFIG_FILE_BYTES");
  check_bad_input(run_loom(dir, "topo --cluster " + big), "MAX_CONFIG_FILE_BYTES");
}

TEST_CASE("cli::HostileInputs: 9. every vertex of a cluster counts against a limit") {
  const TempDir dir("hostile9");
  // One GPU plus 2,000 switches per node, 65,536 nodes: 131M vertices.
  nlohmann::json vertices = nlohmann::json::array(), links = nlohmann::json::array();
  vertices.push_back({{"name", "gpu0"}, {"kind", "gpu"}});
  vertices.push_back({{"name", "nic0"}, {"kind", "nic"}});
  links.push_back({{"a", "gpu0"}, {"b", "nic0"}, {"type", "pcie5"}});
  for (int i = 0; i < 2000; ++i) {
    const std::string name = "sw" + std::to_string(i);
    vertices.push_back({{"name", name}, {"kind", "pcie-switch"}});
    links.push_back({{"a", "gpu0"}, {"b", name}, {"type", "pcie5"}});
  }
  nlohmann::json cluster = {{"gpu", "h100-sxm"},
                            {"nodes", 65536},
                            {"node", {{"vertices", vertices}, {"links", links}}},
                            {"fabric", {{"link", "ib-ndr"}}}};
  const std::string path = dir.file("switches.json");
  write(path, cluster.dump());
  check_bad_input(run_loom(dir, "topo --cluster " + path), "MAX_TOPOLOGY_VERTICES");
}

TEST_CASE("cli::HostileInputs: 10. error messages are one printable, bounded line") {
  const TempDir dir("hostile10");
  // A key with a newline and an ESC sequence.
  const std::string key = dir.file("key.json");
  write(key, R"({"base": "llama3-8b", "bad\nkey\u001b[31m": 1})");
  Run r = run_loom(dir, "memory --model " + key + " --gpu h100");
  check_bad_input(r, "unknown key 'bad\\nkey\\x1b[31m'");
  // A 5M-element array is quoted as an excerpt, not whole.
  const std::string big = dir.file("big.json");
  std::string text = R"({"base": "llama3-8b", "layers": [)";
  for (int i = 0; i < 5'000'000; ++i) text += i ? ",0" : "0";
  write(big, text + "]}");
  r = run_loom(dir, "memory --model " + big + " --gpu h100");
  check_bad_input(r, "/layers");
  CHECK(r.err.size() < 400);
  // Not UTF-8 inside a JSON string: the parse error quotes it escaped.
  const std::string bytes = dir.file("bytes.json");
  write(bytes, "{\"base\": \"llama3-8b\", \"name\": \"bad\xff\xfename\"}");
  check_bad_input(run_loom(dir, "memory --model " + bytes + " --gpu h100"), "\\xff");
}

TEST_CASE("cli::HostileInputs: 11. the trace file is checked first and write errors count") {
  const TempDir dir("hostile11");
  const std::string sim = "simulate --model gpt-1.7b --cluster dgx-a100 --tp 2 --pp 2 --gbs 8 ";
  check_bad_input(run_loom(dir, sim + "--trace /dev/full"), "--trace");
  // Checked before the simulation: before the calibration profile, read just before it.
  const Run r = run_loom(
      dir, sim + "--trace /nonexistent/dir/trace.json --calibration " + dir.file("missing.json"));
  check_bad_input(r, "--trace");
  CHECK(r.err.find("missing.json") == std::string::npos);
  check_bad_input(run_loom(dir, sim + "--trace " + dir.path().string()), "--trace");
}

TEST_CASE("cli::HostileInputs: 12. collective sizes below one byte are rejected") {
  const TempDir dir("hostile12");
  check_bad_input(run_loom(dir, "collective --cluster dgx-h100 --op all_reduce -b 0.5 -e 3"), "-b");
  check_bad_input(run_loom(dir, "collective --cluster dgx-h100 --op all_reduce -b 8 -e 12.5"),
                  "-e");
  CHECK(run_loom(dir, "collective --cluster dgx-h100 --op all_reduce -b 1 -e 3").status == 0);
}
