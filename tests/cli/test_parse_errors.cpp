// Issue 33, "Messages in loom's voice": every command-line mistake CLI11 catches is one loom
// line naming the flag and the fix (exit 2), never CLI11's own words; a plan that does not fit
// under --require-fit names what would make it fit (exit 3); the notes on silent traps.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tests/cli/cli_run.hpp"

using loom::testing::check_bad_input;
using loom::testing::Run;
using loom::testing::run_loom;

namespace {

// Phrases of CLI11 (CLI/Error.hpp) that must never reach the user.
void check_not_cli11(const Run& r) {
  INFO("stderr: " << r.err);
  for (const char* phrase :
       {"required but received", "arguments were not expected", "argument was not expected",
        "required INT missing", "required TEXT missing", "required FLOAT missing", " not in {",
        "not in range", " excludes ", "Could not convert", "A subcommand is required",
        "Expected exactly", "Should be true/false"}) {
    CHECK_MESSAGE(r.err.find(phrase) == std::string::npos, phrase);
  }
}

struct Case {
  const char* args;
  const char* needle;  // what the one line must say
};

}  // namespace

TEST_CASE("cli::parse_errors: each kind of CLI11 parse error is one loom line, exit 2") {
  const loom::testing::TempDir dir("parse_errors");
  const std::vector<Case> cases = {
      // ArgumentMismatch, at most 1
      {"topo --cluster dgx-h100 --cluster dgx-h100", "--cluster was given 2 times; give it once"},
      {"topo --cluster dgx-h100 --gpus 8 --gpus 16", "--gpus was given 2 times"},
      // ArgumentMismatch, a value missing
      {"topo --cluster dgx-h100 --nodes", "--nodes needs a whole number after it"},
      {"topo --cluster dgx-h100 --nodes=", "--nodes needs a whole number"},
      {"memory --model llama3-8b --cluster dgx-h100 --tp", "--tp needs a whole number"},
      // ArgumentMismatch, too few values
      {"topo --cluster dgx-h100 --path 0", "--path takes 2 values"},
      // ExtrasError: a flag of another command, a stray positional, a short flag
      {"calibrate show x --format json", "unknown flag '--format' for `loom calibrate show`"},
      {"topo --cluster dgx-h100 --bogus", "unknown flag '--bogus' for `loom topo`"},
      {"topo --cluster dgx-h100 --nodez 2", "did you mean '--nodes'?"},
      {"topo --cluster dgx-h100 extra", "unexpected argument 'extra' for `loom topo`"},
      {"memory --model llama3-8b --cluster dgx-h100 -x", "unknown flag '-x'"},
      // ConversionError
      {"topo --cluster dgx-h100 --nodes x", "--nodes: 'x' is not a whole number"},
      {"memory --model llama3-8b --cluster dgx-h100 --tp 1.5", "--tp: '1.5' is not a whole"},
      {"topo --cluster dgx-h100 --nodes 99999999999999999999", "out of range"},
      // ValidationError: IsMember, Range, a positional's set
      {"topo --cluster dgx-h100 --format xml", "--format: 'xml' is not one of table, json, dot"},
      {"topo --cluster dgx-h100 --format jsn", "(did you mean 'json'?)"},
      {"search --model llama3-8b --cluster dgx-h100 --top 0",
       "--top: 0 is out of range; give a value from 1 to 100000"},
      {"presets bogus", "`loom presets`'s kind argument: 'bogus' is not one of models, clusters"},
      // RequiredError: a flag, a positional, a subcommand
      {"topo", "--cluster is required"},
      {"calibrate show", "`loom calibrate show` needs its profile argument"},
      {"calibrate", "`loom calibrate` needs a subcommand: "},
      // ExcludesError
      {"plan --model llama3-8b --tokens 1e12 --gpu h100 --days 3 --budget 5",
       "--days and --budget cannot be given together; keep one"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.args);
    const Run r = run_loom(dir, c.args);
    check_bad_input(r, c.needle);
    check_not_cli11(r);
  }
}

TEST_CASE("cli::parse_errors: a required flag's message says what it takes") {
  const loom::testing::TempDir dir("parse_required");
  const Run r = run_loom(dir, "simulate --model llama3-8b");
  check_bad_input(r, "--cluster is required (cluster preset (see `loom presets clusters`)");
  CHECK(r.err.find("see `loom simulate --help`") != std::string::npos);
}
