// Issue 34, items 3, 8, 9 and 10: inputs within the documented limits that took gigabytes,
// printed overflowed numbers or were believed, and outputs written in place. Each case runs
// the loom binary on the issue's input (generated here) and expects exit 2 with one printable
// line naming the field or the limit (docs/limits.md), or the old file kept whole.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "tests/cli/cli_run.hpp"
#include "tests/temp_dir.hpp"

using namespace loom::testing;

namespace {

const std::string PLAN =
    "plan --model examples/models/tiny-gpt.json --gpu h100 --gpus 8 --gbs 16 "
    "--seq 1024 --threads 1 --exact 1";
const std::string SIMULATE =
    "simulate --model examples/models/tiny-gpt.json --cluster dgx-h100 --gbs 16 --seq 1024";

// Files in `dir` other than the runner's stdout.txt and stderr.txt and `keep`.
int stray_files(const TempDir& dir, const std::string& keep) {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    const std::string name = entry.path().filename().string();
    if (name != "stdout.txt" && name != "stderr.txt" && name != keep) ++n;
  }
  return n;
}

// `args` writes `flag` FILE where FILE already holds an old version, and the file size limit
// (ulimit -f, with SIGXFSZ ignored so that write() fails with EFBIG as on a full disk) stops
// the new one partway: exit 2 naming the flag and the reason, the old file whole, no
// temporary file left beside it.
void check_kept_whole(const std::string& args, const std::string& flag, const std::string& name) {
  const TempDir dir("outputs");
  const std::string path = dir.file(name);
  write(path, "the old file\n");
  const Run r = run_loom(dir, args + " " + flag + " " + path, "trap '' XFSZ; ulimit -f 2;");
  INFO(args << " " << flag << ": " << r.err);
  CHECK(r.status == 2);
  CHECK(r.err.find(path) != std::string::npos);
  CHECK(r.err.find("File too large") != std::string::npos);
  CHECK(read_all(path) == "the old file\n");
  CHECK(stray_files(dir, name) == 0);
}

}  // namespace

TEST_CASE("cli::HostileOutputs: 9. a failed write leaves the old file whole") {
  check_kept_whole(SIMULATE + " --network ideal", "--report", "report.html");
  check_kept_whole(SIMULATE + " --network ideal", "--trace", "trace.json");
  check_kept_whole(PLAN + " --tokens 1T --network ideal", "--chart", "chart.svg");
  check_kept_whole("calibrate import tests/sim/calibration_data/kineto_train_2steps.json", "-o",
                   "profile.json");
}

TEST_CASE("cli::HostileOutputs: 9. outputs replace files and keep their permissions") {
  const TempDir dir("outputs_ok");
  const std::string path = dir.file("profile.json");
  write(path, "old");
  std::filesystem::permissions(path, std::filesystem::perms(0640));
  const Run r = run_loom(
      dir, "calibrate import tests/sim/calibration_data/kineto_train_2steps.json -o " + path);
  CHECK(r.status == 0);
  CHECK(read_all(path).find("\"loom-calibration\"") != std::string::npos);
  CHECK(std::filesystem::status(path).permissions() == std::filesystem::perms(0640));
  CHECK(stray_files(dir, "profile.json") == 0);
  // A device is written in place (the goldens write profiles to /dev/null).
  CHECK(run_loom(dir,
                 "calibrate import tests/sim/calibration_data/kineto_train_2steps.json -o "
                 "/dev/null")
            .status == 0);
}

TEST_CASE("cli::HostileOutputs: 3. JSON inputs are bounded in values, not only in bytes") {
  // A calibration profile of 17M empty objects (51 MB, within MAX_MEASUREMENT_FILE_BYTES)
  // took ~1.4 GB to parse; now the count stops it before parsing.
  const TempDir dir("values");
  const std::string profile = dir.file("profile.json");
  std::string text = R"({"format": "loom-calibration", "junk": [{})";
  text.reserve(3 << 24);
  for (int i = 0; i < (1 << 24); ++i) text += ",{}";
  write(profile, text + "]}");
  check_bad_input(run_loom(dir, "calibrate show " + profile), "MAX_JSON_VALUES");
  check_bad_input(run_loom(dir, SIMULATE + " --calibration " + profile), "MAX_JSON_VALUES");
}

TEST_CASE("cli::HostileOutputs: 8. plan --tokens is bounded; no overflowed number is printed") {
  const TempDir dir("tokens");
  // --tokens 1e30 printed GPU-hours of -9,223,372,036,854,775,808 (llrint overflow), exit 0.
  check_bad_input(run_loom(dir, PLAN + " --tokens 1e30"), "MAX_TRAINING_TOKENS");
  // At the limit every figure prints as a number.
  const Run r = run_loom(dir, PLAN + " --tokens 1e15 --network ideal");
  CHECK(r.status == 0);
  CHECK(r.out.find("-9,223") == std::string::npos);
  CHECK(r.out.find("h100") != std::string::npos);
  // --days 0 quoted a 309-digit bound.
  check_bad_input(run_loom(dir, PLAN + " --tokens 1T --days 0"), "--days: invalid value '0'");
  check_bad_input(run_loom(dir, PLAN + " --tokens 1T --budget -5"), "--budget");
}

TEST_CASE("cli::HostileOutputs: 10. seeds, names, empty output paths and integer ranges") {
  const TempDir dir("smaller");
  // --seed of 2^64, 1e23 and -1 became 2^64 - 1.
  for (const char* seed : {"18446744073709551616", "1e23", "-1"})
    check_bad_input(run_loom(dir, SIMULATE + " --seed=" + seed), "--seed: invalid value");
  CHECK(run_loom(dir, SIMULATE + " --network ideal --seed 18446744073709551615").status == 0);
  // A bidirectional override in a name, and a name of 10 MB, were printed raw.
  const std::string model = dir.file("model.json");
  write(model,
        "{\"base\": \"llama3-8b\", \"name\": \"ab\xE2\x80\xAE"
        "cd\"}");
  const Run bidi = run_loom(dir, "memory --gpu h100 --model " + model);
  check_bad_input(bidi, "ab\\u202ecd");
  write(model, R"({"base": "llama3-8b", "name": ")" + std::string(10 << 20, 'x') + "\"}");
  check_bad_input(run_loom(dir, "memory --gpu h100 --model " + model), "MAX_NAME_BYTES");
  // --trace "" and --chart "" were ignored while --report "" was an error.
  check_bad_input(run_loom(dir, SIMULATE + " --trace ''"), "--trace: invalid value ''");
  check_bad_input(run_loom(dir, PLAN + " --tokens 1T --chart ''"), "--chart: invalid value ''");
  check_bad_input(run_loom(dir, SIMULATE + " --report ''"), "--report: invalid value ''");
  // An integer beyond the flag's type was called "not a whole number".
  check_bad_input(run_loom(dir, SIMULATE + " --nodes 2147483648"),
                  "'2147483648' is a whole number out of range");
}
