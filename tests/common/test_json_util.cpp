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
  CHECK(link.get_quantity("latency", Unit::TIME) == doctest::Approx(1e-6));
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
