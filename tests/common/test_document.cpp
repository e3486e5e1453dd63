#include <doctest/doctest.h>

#include "common/document.hpp"

using namespace loom;

TEST_CASE("common::make_document: whole byte counts are integers, other numbers are untouched") {
  OrderedJson results;
  results["peak_memory_bytes"] = 1.2e9;
  results["capacity_bytes"] = 84943715696.64;  // a fraction stays a double
  results["dp_bytes_per_gpu"] = 4096.0;
  results["bytes_per_parameter"] = 16.0;  // a ratio, not a count
  results["step_time_s"] = 2.0;
  results["rows"] = OrderedJson::array({{{"size_bytes", 1024.0}}});
  results["stage_bytes"] = OrderedJson::array({1.0, 2.5});
  const OrderedJson doc = make_document(OrderedJson::object(), results);
  const OrderedJson& r = doc["results"];
  CHECK(r["peak_memory_bytes"].is_number_integer());
  CHECK(r["peak_memory_bytes"] == 1200000000);
  CHECK(r["capacity_bytes"].is_number_float());
  CHECK(r["dp_bytes_per_gpu"].is_number_integer());
  CHECK(r["bytes_per_parameter"].is_number_float());
  CHECK(r["step_time_s"].is_number_float());
  CHECK(r["rows"][0]["size_bytes"].is_number_integer());
  CHECK(r["stage_bytes"][0].is_number_integer());
  CHECK(r["stage_bytes"][1].is_number_float());
  CHECK(render_document(doc).find("1200000000,") != std::string::npos);
}
