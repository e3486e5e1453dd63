#include "common/document.hpp"

#include <cmath>
#include <cstdint>
#include <string_view>

#include "common/version.hpp"

namespace loom {

namespace {

// Whether `key` names a byte count ("peak_memory_bytes", "bytes", "dp_bytes_per_gpu"); not a
// ratio ("bytes_per_parameter") nor a band's pair of edges ("peak_bytes_band").
bool is_bytes_key(std::string_view key) {
  return key == "bytes" || (key.size() > 6 && key.substr(key.size() - 6) == "_bytes") ||
         key.find("_bytes_per_") != std::string_view::npos;
}

// A whole number of bytes held as a double becomes an integer (167772160, not 1.6777216e+08),
// so that tools reading the JSON get an integer type; fractions (averages) stay as they are.
void integral_byte_counts(OrderedJson& value, bool bytes) {
  if (value.is_number_float() && bytes) {
    const double v = value.get<double>();
    if (std::abs(v) < 0x1p53 && std::floor(v) == v) value = static_cast<std::int64_t>(v);
  } else if (value.is_object()) {
    for (auto& [key, child] : value.items()) integral_byte_counts(child, is_bytes_key(key));
  } else if (value.is_array()) {
    for (auto& child : value) integral_byte_counts(child, bytes);
  }
}

}  // namespace

OrderedJson make_document(OrderedJson context, OrderedJson results) {
  OrderedJson doc;
  doc["schema_version"] = 1;
  doc["tool"] = "loom";
  doc["version"] = VERSION;
  doc["context"] = std::move(context);
  doc["results"] = std::move(results);
  integral_byte_counts(doc, false);
  return doc;
}

std::string render_document(const OrderedJson& document) {
  return dump_json(document, 2) + "\n";
}

std::string dump_json(const OrderedJson& value, int indent) {
  return value.dump(indent, ' ', false, OrderedJson::error_handler_t::replace);
}

}  // namespace loom
