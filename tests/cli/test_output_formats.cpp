// The CSV and JSON that tools load (issue 33, "Outputs tools load"), checked alike across
// simulate, memory, search, plan and collective by running the loom binary: every CSV record
// starts with its `schema` column; booleans are true/false; sizes are plain numbers of bytes
// (no "160MB" strings); whole byte counts are JSON integers; tokens/s per GPU is tokens/s over
// the plan's GPUs.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "tests/cli/cli_run.hpp"

using loom::testing::run_loom;
using nlohmann::json;

namespace {

const std::string SIMULATE =
    "simulate --model llama3-8b --cluster dgx-h100 --tp 8 --network analytical";
const std::string MEMORY =
    "memory --model llama3-70b --cluster dgx-h100 --nodes 8 --tp 8 --pp 4 --seq 4k";
const std::string SEARCH =
    "search --model examples/models/tiny-gpt.json --cluster dgx-a100 --nodes 1 --gbs 16 "
    "--seq 1024 --top 3";
// 8 A100s cannot hold llama3-70b: one infeasible row, one feasible.
const std::string PLAN =
    "plan --model llama3-70b --tokens 1T --gpu a100 --gpus 8 64 --gbs 64 --seq 1024 --threads 2";
const std::string COLLECTIVE = "collective --cluster dgx-h100 --op all_gather -b 1K -e 1M -f 32";

std::string output(const std::string& args) {
  loom::testing::TempDir dir("outputs");
  const auto r = run_loom(dir, args);
  INFO(args << "\n" << r.err);
  REQUIRE(r.status == 0);
  return r.out;
}

// RFC 4180 records (fields split on commas outside quotes; "" inside quotes is one quote).
using Records = std::vector<std::map<std::string, std::string>>;
Records parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> lines(1, std::vector<std::string>(1));
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted && c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
      lines.back().back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (!quoted && c == ',') {
      lines.back().emplace_back();
    } else if (!quoted && c == '\n') {
      lines.emplace_back(1);
    } else {
      lines.back().back() += c;
    }
  }
  if (lines.back().size() == 1 && lines.back()[0].empty()) lines.pop_back();
  REQUIRE(lines.size() >= 2);
  Records out;
  for (size_t i = 1; i < lines.size(); ++i) {
    REQUIRE(lines[i].size() == lines[0].size());
    std::map<std::string, std::string> record;
    for (size_t k = 0; k < lines[0].size(); ++k) record[lines[0][k]] = lines[i][k];
    out.push_back(record);
  }
  CHECK(lines[0].front() == "schema");
  return out;
}

// A size written with a unit, as plan files write them ("160MB", "536870912B", "0.5GiB").
bool sized_text(const std::string& s) {
  static const std::regex re(R"(^[0-9.]+(e[+-]?[0-9]+)?\s*(B|[kKMGTPE]i?B)$)");
  return std::regex_match(s, re);
}

bool is_number(const std::string& s) {
  if (s.empty()) return false;
  size_t used = 0;
  try {
    (void)std::stod(s, &used);
  } catch (...) {
    return false;
  }
  return used == s.size();
}

double num(const std::map<std::string, std::string>& r, const std::string& key) {
  INFO(key);
  REQUIRE(r.count(key) == 1);
  REQUIRE(is_number(r.at(key)));
  return std::stod(r.at(key));
}

// The columns that hold a switch or verdict in some command's CSV.
const std::set<std::string> BOOLEAN_COLUMNS = {"sp",
                                               "overlap_grad_reduce",
                                               "overlap_param_gather",
                                               "fits",
                                               "feasible",
                                               "tp_comm_overlap",
                                               "cuda_graphs",
                                               "band_extrapolation",
                                               "overlap_moe_expert_parallel_comm",
                                               "graphed",
                                               "statistically_tied",
                                               "flash_attention",
                                               "mtp",
                                               "reshard_after_forward",
                                               "fp8_weight_cache",
                                               "scale_swizzle"};

void check_csv(const std::string& command, const std::string& args) {
  CAPTURE(command);
  const Records records = parse_csv(output(args + " --format csv"));
  for (const auto& r : records) {
    CHECK(r.at("schema") == "loom." + command + ".v1");
    for (const auto& column : r) {
      // named copies: clang 14 cannot capture structured bindings (CAPTURE is a lambda)
      const std::string& key = column.first;
      const std::string& value = column.second;
      CAPTURE(key);
      CAPTURE(value);
      if (BOOLEAN_COLUMNS.count(key)) CHECK((value == "true" || value == "false" || value.empty()));
      CHECK_FALSE(sized_text(value));
      if (key.size() > 6 && key.substr(key.size() - 6) == "_bytes" && !value.empty())
        CHECK(is_number(value));
    }
    if (r.count("tokens_per_s") && !r.at("tokens_per_s").empty()) {
      const double gpus = num(r, "tp") * num(r, "pp") * num(r, "dp") * num(r, "cp");
      CHECK(num(r, "tokens_per_s_per_gpu") ==
            doctest::Approx(num(r, "tokens_per_s") / gpus).epsilon(1e-12));
    }
  }
}

// Walks a JSON document: no size strings, whole byte counts as integers, tokens/s per GPU
// beside every tokens/s of an object that has a plan (or, in simulate, the context's plan).
void check_json_value(const json& v, const std::string& key, const json* plan, int& pairs) {
  CAPTURE(key);
  if (v.is_string()) CHECK_FALSE(sized_text(v.get<std::string>()));
  const bool bytes = key == "bytes" || (key.size() > 6 && key.substr(key.size() - 6) == "_bytes");
  if (bytes && v.is_number()) {
    const double d = v.get<double>();
    if (std::floor(d) == d && std::abs(d) < 0x1p53) CHECK(v.is_number_integer());
  }
  if (v.is_object()) {
    const json* own = v.contains("plan") && v["plan"].is_object() ? &v["plan"] : plan;
    if (v.contains("tokens_per_s") && v["tokens_per_s"].is_number()) {
      REQUIRE(own != nullptr);
      REQUIRE(v.contains("tokens_per_s_per_gpu"));
      const double gpus = (*own)["tp"].get<double>() * (*own)["pp"].get<double>() *
                          (*own)["dp"].get<double>() * (*own)["cp"].get<double>();
      CHECK(v["tokens_per_s_per_gpu"].get<double>() ==
            doctest::Approx(v["tokens_per_s"].get<double>() / gpus).epsilon(1e-12));
      ++pairs;
    }
    for (const auto& [k, child] : v.items()) check_json_value(child, k, own, pairs);
  } else if (v.is_array()) {
    for (const auto& child : v) check_json_value(child, key, plan, pairs);
  }
}

int check_json(const std::string& args) {
  CAPTURE(args);
  const json doc = json::parse(output(args + " --format json"));
  REQUIRE(doc["schema_version"].is_number_integer());
  const json* plan = doc["context"].contains("plan") ? &doc["context"]["plan"] : nullptr;
  int pairs = 0;
  check_json_value(doc, "", plan, pairs);
  return pairs;
}

}  // namespace

TEST_CASE("cli outputs: CSV of every command: schema column, true/false, numeric sizes, per GPU") {
  check_csv("simulate", SIMULATE);
  check_csv("memory", MEMORY);
  check_csv("search", SEARCH);
  check_csv("plan", PLAN);
  check_csv("collective", COLLECTIVE);
}

TEST_CASE("cli outputs: JSON of every command: integral byte counts, numeric sizes, per GPU") {
  CHECK(check_json(SIMULATE) == 1);
  check_json(MEMORY);
  CHECK(check_json(SEARCH) == 3);
  CHECK(check_json(PLAN) == 1);
  check_json(COLLECTIVE);
}

TEST_CASE("cli outputs: sizes under _bytes keys, and the plan CSV says why a row has no plan") {
  const json doc = json::parse(output(MEMORY + " --format json"));
  const json& plan = doc["context"]["plan"];
  CHECK(plan["dp_bucket_size_bytes"].is_number_integer());
  CHECK(plan["cuda_context_bytes"] == 536870912);  // the 0.5 GiB default (docs/defaults.md)
  CHECK_FALSE(plan.contains("dp_bucket_size"));
  CHECK_FALSE(plan.contains("cuda_context"));

  const Records rows = parse_csv(output(PLAN + " --format csv"));
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].at("feasible") == "false");
  CHECK(rows[0].at("reason").find("fits in") != std::string::npos);
  CHECK(rows[1].at("feasible") == "true");
  CHECK(rows[1].at("reason").empty());
  for (const char* overlap : {"overlap_grad_reduce", "overlap_param_gather", "tp_comm_overlap",
                              "overlap_moe_expert_parallel_comm"})
    CHECK(rows[1].count(overlap) == 1);
}
