#include <doctest/doctest.h>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "common/strings.hpp"

#include <fstream>
#include <string>

#include "tests/temp_dir.hpp"

using namespace loom;

TEST_CASE("common::json: malformed JSON reports line and column") {
  CHECK_THROWS_WITH_AS(parse_json_text("{\n  \"a\": 1,\n  oops\n}", "x.json"),
                       doctest::Contains("x.json:3:3: malformed JSON"), ConfigError);
}

TEST_CASE("common::json: a missing file is a ConfigError naming it") {
  CHECK_THROWS_WITH_AS(load_json_file("/nonexistent/m.json", "model"),
                       doctest::Contains("/nonexistent/m.json: cannot open model file"),
                       ConfigError);
}

TEST_CASE("common::json: unknown keys are errors with a did-you-mean hint") {
  auto j = parse_json_text(R"({"layers": 2, "hiden": 5})", "m.json");
  ObjectReader r(j, "m.json", "");
  CHECK(r.get_positive_int("layers") == 2);
  CHECK(r.get_positive_int_or("hidden", 7) == 7);
  CHECK_THROWS_WITH_AS(r.finish(), doctest::Contains("unknown key 'hiden'; did you mean 'hidden'?"),
                       ConfigError);
}

TEST_CASE("common::json: quantities need units; errors carry the JSON pointer") {
  auto j = parse_json_text(R"({"link": {"bandwidth": "450", "latency": "1us"}})", "c.json");
  ObjectReader r(j, "c.json", "");
  auto link = r.child("link");
  CHECK(link.get_quantity("latency", Unit::TIME) == doctest::Approx(1e-6).scale(0));
  CHECK_THROWS_WITH_AS(link.get_quantity("bandwidth", Unit::BANDWIDTH),
                       doctest::Contains("/link/bandwidth"), ConfigError);
}

TEST_CASE("common::json: non-positive counts are rejected by name") {
  auto j = parse_json_text(R"({"layers": 0})", "m.json");
  ObjectReader r(j, "m.json", "");
  CHECK_THROWS_WITH_AS(r.get_positive_int("layers"), doctest::Contains("/layers: invalid value 0"),
                       ConfigError);
}

TEST_CASE("common::strings: did_you_mean suggests only close names") {
  CHECK(did_you_mean("llama3-7b", {"llama3-8b", "llama3-70b", "gpt3-175b"}) == "llama3-8b");
  CHECK(did_you_mean("zzzzzzzz", {"llama3-8b"}).empty());
}

TEST_CASE("common::json: a directory or an empty file is named as such, not as malformed JSON") {
  CHECK_THROWS_WITH_AS(load_json_file(LOOM_SOURCE_DIR "/examples", "cluster"),
                       doctest::Contains("is a directory, not a cluster file"), ConfigError);
  const loom::testing::TempDir dir("json_util");
  const std::string empty = dir.file("empty.json");
  {
    std::ofstream out(empty);
    out << "  \n";
  }
  CHECK_THROWS_WITH_AS(load_json_file(empty, "model"), doctest::Contains("the model file is empty"),
                       ConfigError);
}

TEST_CASE("common::json: integers out of range or too large for a double are rejected") {
  auto j = parse_json_text(R"({"a": 1e300, "b": 9007199254740993, "c": 4.5, "d": 70, "e": -1,
                              "f": true})",
                           "m.json");
  ObjectReader r(j, "m.json", "");
  // 1e300 used to be converted to int64 (undefined behaviour) before the range check.
  CHECK_THROWS_WITH_AS(r.get_positive_int("a"), doctest::Contains("/a: invalid value 1e+300"),
                       ConfigError);
  CHECK_THROWS_AS(r.get_positive_int("b"), ConfigError);  // 2^53 + 1
  CHECK_THROWS_WITH_AS(r.get_count_or("c", 0), doctest::Contains("a non-negative integer"),
                       ConfigError);
  CHECK_THROWS_WITH_AS(r.get_int_in_range("d", 1, 64),
                       doctest::Contains("/d: invalid value 70; allowed: an integer from 1 to 64"),
                       ConfigError);
  CHECK(r.get_int_in_range("d", 1, 70) == 70);
  CHECK_THROWS_AS(r.get_count_or("e", 0), ConfigError);
  CHECK_THROWS_AS(r.get_positive_int("f"), ConfigError);  // a boolean is not a number
  CHECK(r.get_int_in_range_or("missing", 1, 2, 7) == 7);
}

TEST_CASE("common::json: nesting deeper than MAX_JSON_DEPTH is rejected before parsing") {
  const std::string ok = std::string(MAX_JSON_DEPTH, '[') + std::string(MAX_JSON_DEPTH, ']');
  CHECK_NOTHROW((void)parse_json_text(ok, "ok.json"));
  const std::string deep = "\n" + std::string(100000, '[') + std::string(100000, ']');
  CHECK_THROWS_WITH_AS(parse_json_text(deep, "d.json"),
                       doctest::Contains("d.json:2:129: JSON nested deeper than 128 levels"),
                       ConfigError);
  // Brackets inside strings do not count.
  const std::string quoted = R"({"a": ")" + std::string(1000, '[') + R"(\"["})";
  CHECK_NOTHROW((void)parse_json_text(quoted, "q.json"));
}

TEST_CASE("common::json: a number beyond a double is a ConfigError, not nlohmann's exception") {
  CHECK_THROWS_WITH_AS(parse_json_text(R"({"nodes": 1e400})", "o.json"),
                       doctest::Contains("o.json: invalid JSON: number overflow parsing '1e400'"),
                       ConfigError);
}

TEST_CASE("common::json: json_excerpt quotes a short, printable piece of any value") {
  CHECK(json_excerpt(nlohmann::json::parse(R"({"b": [1, 2], "a": "x"})")) ==
        R"({"a": "x", "b": [1, 2]})");
  nlohmann::json big = nlohmann::json::array();
  for (int i = 0; i < 100000; ++i) big.push_back(i);
  const std::string e = json_excerpt(big);
  CHECK(e.size() <= static_cast<size_t>(MAX_ECHO_BYTES) + 3);
  CHECK(e.rfind("[0, 1, 2, ", 0) == 0);
  CHECK(e.substr(e.size() - 3) == "...");
  CHECK(json_excerpt(nlohmann::json("esc\x1b")) == R"("esc\u001b")");
  // A string cut inside a multi-byte character still gives valid text.
  CHECK(is_printable(json_excerpt(nlohmann::json(std::string(79, 'a') + "日本"))));
}

TEST_CASE("common::json: strings with control characters are rejected by key") {
  auto j = parse_json_text(R"({"name": "a\u001b[31mb", "ok": "é"})", "m.json");
  ObjectReader r(j, "m.json", "");
  CHECK(r.get_string("ok") == "é");
  CHECK_THROWS_WITH_AS(r.get_string("name"),
                       doctest::Contains("m.json: /name: invalid value \"a\\u001b[31mb\""),
                       ConfigError);
}

TEST_CASE("common::json: only regular files up to the limit are read") {
  CHECK_THROWS_WITH_AS(read_text_file("/dev/zero", "model"),
                       doctest::Contains("not a regular file"), ConfigError);
  const testing::TempDir dir("json_limit");
  const std::string path = dir.file("big.json");
  std::ofstream(path) << std::string(2000, ' ') << "{}";
  CHECK_THROWS_WITH_AS(read_text_file(path, "model", 1000),
                       doctest::Contains("holds 2002 bytes, over loom's limit of 1000"),
                       ConfigError);
  CHECK(read_text_file(path, "model", 2002).size() == 2002);
}

TEST_CASE("common::json: more values than MAX_JSON_VALUES are rejected before parsing") {
  // Counted exactly: the root, one per comma, one per non-empty array or object; a member
  // counts once, brackets and commas inside strings not at all.
  CHECK_NOTHROW(check_json_bounds(R"({"a": [1, {"b": "[,]"}], "c": {}})", "ok.json"));
  // [0,0,...,0] with MAX_JSON_VALUES - 1 zeros holds exactly MAX_JSON_VALUES values.
  std::string text = "[";
  text.reserve(static_cast<size_t>(2 * MAX_JSON_VALUES + 8));
  for (std::int64_t i = 0; i < MAX_JSON_VALUES - 1; ++i) text += i == 0 ? "0" : ",0";
  CHECK_NOTHROW(check_json_bounds(text + "]", "ok.json"));
  // The issue's trace: "{}," repeated; one more value is one too many, found at its comma.
  text += ",{}]";
  CHECK_THROWS_WITH_AS(
      parse_json_text(text, "big.json"),
      doctest::Contains("big.json:1:33554431: JSON holds more than 16777216 values (loom's "
                        "limit MAX_JSON_VALUES, docs/limits.md)"),
      ConfigError);
}
