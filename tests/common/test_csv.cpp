#include <doctest/doctest.h>

#include "common/csv.hpp"
#include "common/error.hpp"

using namespace loom;

TEST_CASE("common::Csv: fields are quoted only when RFC 4180 requires it") {
  CHECK(csv_field("plain") == "plain");
  CHECK(csv_field("") == "");
  CHECK(csv_field("20,20") == "\"20,20\"");
  CHECK(csv_field("say \"hi\"") == "\"say \"\"hi\"\"\"");  // quotes doubled inside quotes
  CHECK(csv_field("two\nlines") == "\"two\nlines\"");
  CHECK(csv_field("cr\r") == "\"cr\r\"");
}

TEST_CASE("common::Csv: a header row, then one LF-terminated row per record, schema first") {
  CsvTable t("demo", 3, {"name", "split"});
  t.add_row({"llama3-8b", "16,16"});
  t.add_row({"a \"b\"", "32"});
  CHECK(t.render() ==
        "schema,name,split\nloom.demo.v3,llama3-8b,\"16,16\"\nloom.demo.v3,\"a \"\"b\"\"\",32\n");
  CHECK_THROWS_AS(t.add_row({"too", "many", "fields"}), InternalError);
}

TEST_CASE("common::Csv: booleans as true and false") {
  CHECK(csv_bool(true) == "true");
  CHECK(csv_bool(false) == "false");
}

TEST_CASE("common::Csv: numbers in the shortest form that reads back exactly") {
  CHECK(csv_number(0.05) == "0.05");
  CHECK(csv_number(8192) == "8192");
  CHECK(std::stod(csv_number(0.1 + 0.2)) == 0.1 + 0.2);
}
