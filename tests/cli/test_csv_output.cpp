// `--format csv` of simulate, memory, collective, ranks and plan: a header of unique column names,
// then records of the same width, parsed back with RFC 4180's quoting. Runs the loom binary.
#include <doctest/doctest.h>

#include <array>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace {

// stdout of `loom <args>`; fails the test when loom exits non-zero.
std::string run(const std::string& args) {
  const std::string cmd = std::string(LOOM_BINARY) + " " + args + " 2>/dev/null";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  REQUIRE(pipe);
  std::string out;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), pipe.get())) > 0) out.append(buf.data(), n);
  REQUIRE(pclose(pipe.release()) == 0);
  return out;
}

// RFC 4180 records: fields split on commas outside quotes, "" inside quotes is one quote.
std::vector<std::vector<std::string>> parse(const std::string& text) {
  std::vector<std::vector<std::string>> records(1, std::vector<std::string>(1));
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        records.back().back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        records.back().back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      records.back().emplace_back();
    } else if (c == '\n') {
      records.emplace_back(1);
    } else {
      records.back().back() += c;
    }
  }
  if (records.back().size() == 1 && records.back()[0].empty()) records.pop_back();
  return records;
}

void check_csv(const std::string& args, size_t want_records) {
  CAPTURE(args);
  const auto records = parse(run(args));
  REQUIRE(records.size() == want_records + 1);
  const auto& header = records.front();
  CHECK(std::set<std::string>(header.begin(), header.end()).size() == header.size());
  for (const auto& r : records) CHECK(r.size() == header.size());
}

}  // namespace

TEST_CASE("cli::Csv: one record per run, stage, message size, rank and configuration") {
  check_csv(
      "simulate --model gpt-1.7b --cluster dgx-a100 --tp 2 --pp 2 --seq 512 --network "
      "ideal --pipeline-split 12,12 --format csv",
      1);
  check_csv("memory --model llama3-8b --gpu h100 --pp 4 --dp 2 --format csv", 4);
  check_csv("collective --cluster dgx-h100 --op all_reduce -b 8 -e 8K -f 4 --format csv", 6);
  check_csv("ranks --cluster dgx-h100 --tp 2 --format csv", 8);
  // tp 4 x pp 2 x dp 2 does not divide 8 GPUs: that configuration's record is as wide, empty.
  check_csv(
      "plan --model examples/models/tiny-gpt.json --tokens 1T --gpu a100 --gpus 8 16 --gbs 16 "
      "--tp 4 --pp 2 --dp 2 --threads 2 --format csv",
      2);
}

TEST_CASE("cli::Csv: a list field is one quoted field") {
  const auto records =
      parse(run("simulate --model gpt-1.7b --cluster dgx-a100 --tp 2 --pp 2 "
                "--seq 512 --network ideal --pipeline-split 10,14 --format csv"));
  REQUIRE(records.size() == 2);
  const auto& header = records[0];
  size_t column = 0;
  while (column < header.size() && header[column] != "pipeline_split") ++column;
  REQUIRE(column < header.size());
  CHECK(records[1][column] == "10,14");
}
