// `loom search` beyond one process: --shard K/N (and its Slurm defaults), --merge of the
// partial results, `mpirun -np 3`, and the Slurm example script: each prints byte for byte
// what the single-process search prints. Runs the loom binary (and mpirun when installed).
#include <doctest/doctest.h>
#include <stdlib.h>  // setenv, unsetenv (POSIX)
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "cli/error_line.hpp"
#include "cli/mpi_world.hpp"
#include "cli/search_shards.hpp"
#include "common/error.hpp"
#include "common/limits.hpp"
#include "tests/temp_dir.hpp"

namespace {

// The small GPT on one DGX A100 with a sample, so that the sample's merge counts too.
const std::string SEARCH =
    " search --model examples/models/tiny-gpt.json --cluster dgx-a100 --nodes 1 --gbs 16 "
    "--seq 1024 --top 5 --sample 8";

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int run(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The single-process answer in `format`, written to `dir`.
std::string single(const loom::testing::TempDir& dir, const std::string& format) {
  const std::string out = dir.file("single." + format);
  REQUIRE(run(std::string(LOOM_BINARY) + SEARCH + " --threads 1 --format " + format + " > " +
              out) == 0);
  return read(out);
}

}  // namespace

TEST_CASE("cli::SearchShards: K/N and the Slurm array defaults") {
  using loom::cli::parse_shard;
  CHECK(parse_shard("1/4").index == 1);
  CHECK(parse_shard("1/4").count == 4);
  CHECK(parse_shard("0/1").count == 1);
  CHECK_THROWS_WITH_AS(parse_shard("4/4"), doctest::Contains("0 <= K < N"), loom::ValidationError);
  CHECK_THROWS_AS(parse_shard("-1/4"), loom::ValidationError);
  CHECK_THROWS_AS(parse_shard("1"), loom::ValidationError);
  CHECK_THROWS_AS(parse_shard("a/b"), loom::ValidationError);
  CHECK_THROWS_AS(parse_shard("1/0"), loom::ValidationError);
  unsetenv("SLURM_ARRAY_TASK_ID");
  unsetenv("SLURM_ARRAY_TASK_COUNT");
  unsetenv("SLURM_ARRAY_TASK_MIN");
  CHECK_THROWS_WITH_AS(parse_shard(""), doctest::Contains("SLURM_ARRAY_TASK_ID"),
                       loom::ValidationError);
  // sbatch --array=4-7: tasks 4..7, count 4, min 4.
  setenv("SLURM_ARRAY_TASK_ID", "6", 1);
  setenv("SLURM_ARRAY_TASK_COUNT", "4", 1);
  setenv("SLURM_ARRAY_TASK_MIN", "4", 1);
  CHECK(parse_shard("").index == 2);
  CHECK(parse_shard("").count == 4);
  unsetenv("SLURM_ARRAY_TASK_MIN");                         // then the task id is the index
  CHECK_THROWS_AS(parse_shard(""), loom::ValidationError);  // 6 is not below 4
  unsetenv("SLURM_ARRAY_TASK_ID");
  unsetenv("SLURM_ARRAY_TASK_COUNT");
}

TEST_CASE("cli::SearchShards: the launchers' numbers and a rank's error line") {
  using loom::cli::env_integer;
  using loom::cli::whole_number;
  CHECK(whole_number("12") == 12);
  CHECK(whole_number("-3") == -3);
  for (const char* bad : {"", " 4", "4x", "0x10", "99999999999999999999"})
    CHECK_FALSE(whole_number(bad).has_value());
  unsetenv("LOOM_TEST_RANKS");
  CHECK_FALSE(env_integer("LOOM_TEST_RANKS").has_value());
  setenv("LOOM_TEST_RANKS", "16", 1);
  CHECK(env_integer("LOOM_TEST_RANKS") == 16);
  setenv("LOOM_TEST_RANKS", "16 ranks", 1);  // atoi would have read 16
  CHECK_FALSE(env_integer("LOOM_TEST_RANKS").has_value());
  unsetenv("LOOM_TEST_RANKS");
  // A rank's error is main.cpp's one line: control characters escaped, the length bounded.
  CHECK(loom::cli::error_line("error (rank 2)", "bad\nvalue") ==
        "loom: error (rank 2): bad\\nvalue\n");
  const std::string line = loom::cli::error_line("error", std::string(10000, 'x'));
  CHECK(line.size() <= static_cast<size_t>(loom::MAX_MESSAGE_BYTES) + 20);
  CHECK(line.back() == '\n');
}

TEST_CASE("cli::SearchShards: 4 shards merged print the single-process answer") {
  const loom::testing::TempDir dir("shards");
  for (const std::string format : {"table", "json"}) {
    CAPTURE(format);
    std::string parts;
    for (int k = 0; k < 4; ++k) {
      const std::string part = dir.file("part" + std::to_string(k) + ".json");
      REQUIRE(run(std::string(LOOM_BINARY) + SEARCH + " --shard " + std::to_string(k) + "/4 > " +
                  part) == 0);
      parts += " " + part;
    }
    const std::string merged = dir.file("merged");
    // Any thread count, any order of the parts.
    REQUIRE(run(std::string(LOOM_BINARY) + SEARCH + " --threads 2 --format " + format +
                " --merge " + dir.file("part3.json") + parts.substr(0, parts.rfind(' ')) + " > " +
                merged) == 0);
    CHECK(read(merged) == single(dir, format));
  }
}

TEST_CASE("cli::SearchShards: merges refuse missing, repeated and foreign parts") {
  const loom::testing::TempDir dir("shards_bad");
  const std::string loom = LOOM_BINARY;
  const std::string p0 = dir.file("p0.json"), p1 = dir.file("p1.json"), err = dir.file("err");
  REQUIRE(run(loom + SEARCH + " --shard 0/2 > " + p0) == 0);
  REQUIRE(run(loom + SEARCH + " --shard 1/2 > " + p1) == 0);
  CHECK(run(loom + SEARCH + " --merge " + p0 + " 2> " + err) == 2);
  CHECK(read(err).find("shard 1/2 is missing") != std::string::npos);
  CHECK(run(loom + SEARCH + " --merge " + p0 + " " + p0 + " " + p1 + " 2> " + err) == 2);
  CHECK(read(err).find("shard 0/2 given twice") != std::string::npos);
  CHECK(run(loom + SEARCH + " --tp 2 --merge " + p0 + " " + p1 + " 2> " + err) == 2);
  CHECK(read(err).find("a partial result of another search") != std::string::npos);
  CHECK(run(loom + SEARCH + " --exact 3 --merge " + p0 + " " + p1 + " 2> " + err) == 2);
  CHECK(read(err).find("merge with the same") != std::string::npos);
  CHECK(run(loom + SEARCH + " --merge examples/models/tiny-gpt.json 2> " + err) == 2);
  CHECK(read(err).find("not a partial result") != std::string::npos);
}

TEST_CASE("cli::SearchShards: forged and damaged parts are refused, not believed") {
  // Issue 34, item 6: shard files were trusted. Each case edits one field of a real part and
  // expects exit 2 with one line naming the field, nothing of the file's text raw.
  const loom::testing::TempDir dir("shards_forged");
  const std::string loom = LOOM_BINARY;
  const std::string p0 = dir.file("p0.json"), p1 = dir.file("p1.json"), err = dir.file("err");
  const std::string bad = dir.file("bad.json");
  REQUIRE(run(loom + SEARCH + " --shard 0/2 > " + p0) == 0);
  REQUIRE(run(loom + SEARCH + " --shard 1/2 > " + p1) == 0);
  const nlohmann::json part = nlohmann::json::parse(read(p0));
  REQUIRE(part["best"].size() >= 2);
  const auto refused = [&](const nlohmann::json& edited, const std::string& needle) {
    std::ofstream(bad) << edited.dump();
    CHECK(run(loom + SEARCH + " --merge " + bad + " " + p1 + " 2> " + err) == 2);
    const std::string message = read(err);
    INFO(message);
    CHECK(message.find(needle) != std::string::npos);
    CHECK(message.find('\x1b') == std::string::npos);
    CHECK(message.find('\n') == message.size() - 1);
  };
  nlohmann::json j = part;
  j["enumerated"] = INT64_MAX;  // merged with the other shard: a negative count
  refused(j, "/enumerated");
  j = part;
  j["shapes"] = 1e300;  // converted to an integer: undefined behaviour
  refused(j, "/shapes: invalid value 1e+300");
  j = part;
  j["invalid_by_field"]["tp"]["example"] = "\x1b[2J\nall plans fit";  // a terminal escape
  refused(j, "/invalid_by_field/tp/example");
  j = part;
  j["best"][0][0] = 1e-9;  // a forged ranking key, printed as the fast tier's estimate
  refused(j, "/best/0: [1e-09, ");
  j = part;
  // A true row, of shard 1. Not `= {row}`: a braced list of one json is a copy of it under
  // clang and a one-element array under GCC (CWG 2137), and CI's sanitized build is clang.
  j["best"] = nlohmann::json::array();
  j["best"].push_back(nlohmann::json::parse(read(p1))["best"][0]);
  refused(j, "is not of this shard");
  j = part;
  j["sample"][0][0] = 0;  // a sample key is the candidate's hash
  refused(j, "is not the candidate's sampling hash");
  // Each shard within the space, the two together over it: as many shapes as the space has
  // (the bound the error of a larger count names) in one shard, some in the other.
  j = part;
  j["shapes"] = INT64_MAX;
  refused(j, "/shapes: invalid value 9223372036854775807; allowed: an integer from 0 to ");
  const std::string message = read(err);
  const std::string bound = message.substr(message.rfind(' ') + 1);
  j["shapes"] = std::stoll(bound);
  refused(j, "more than the search has");
}

TEST_CASE("cli::SearchShards: the Slurm example script, run as 4 array tasks and a merge") {
  const loom::testing::TempDir dir("slurm");
  const std::string env = "LOOM=" + std::string(LOOM_BINARY) +
                          " LOOM_SEARCH_DIR=" + dir.file("parts") + " LOOM_SEARCH_ARGS='" +
                          SEARCH.substr(8) + "'";
  for (int k = 0; k < 4; ++k) {
    REQUIRE(run(env + " SLURM_ARRAY_TASK_ID=" + std::to_string(k) +
                " SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_COUNT=4 "
                "examples/slurm/search_array.sbatch") == 0);
  }
  const std::string merged = dir.file("merged");
  REQUIRE(run(env + " LOOM_MERGE=1 SLURM_CPUS_PER_TASK=2 examples/slurm/search_array.sbatch > " +
              merged) == 0);
  CHECK(read(merged) == single(dir, "table"));
}

TEST_CASE("cli::SearchShards: mpirun -np 3 prints the single-process answer") {
  if (run("command -v mpirun > /dev/null 2>&1") != 0) {
    MESSAGE("mpirun is not installed (Debian openmpi-bin): skipped");
    return;
  }
#if defined(LOOM_MPI_OPTED_OUT)
  MESSAGE("loom was configured with -DLOOM_WITH_MPI=OFF: skipped");
  return;
#elif !defined(LOOM_WITH_MPI)
  FAIL(
      "mpirun is installed but loom was built without MPI: install libopenmpi-dev "
      "(scripts/setup) and reconfigure");
#endif
  const loom::testing::TempDir dir("mpi");
  for (const std::string format : {"table", "json", "csv"}) {
    CAPTURE(format);
    const std::string out = dir.file("mpi." + format);
    // Sanitized, the ranks run without LeakSanitizer: OpenMPI keeps its MPI_Init state until
    // exit by design, in components it has unloaded by then (no suppression can name them).
    // AddressSanitizer and UBSan stay on; loom's own search and merge run under LeakSanitizer
    // in the --shard/--merge tests. A release build ignores the variable.
    REQUIRE(run("ASAN_OPTIONS=\"$ASAN_OPTIONS:detect_leaks=0\" mpirun --oversubscribe "
                "--allow-run-as-root -np 3 " +
                std::string(LOOM_BINARY) + SEARCH + " --format " + format + " > " + out + " 2> " +
                dir.file("mpi.err")) == 0);
    CHECK(read(out) == single(dir, format));
  }
}
