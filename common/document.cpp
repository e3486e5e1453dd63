#include "common/document.hpp"

#include "common/version.hpp"

namespace loom {

OrderedJson make_document(OrderedJson context, OrderedJson results) {
  OrderedJson doc;
  doc["schema_version"] = 1;
  doc["tool"] = "loom";
  doc["version"] = VERSION;
  doc["context"] = std::move(context);
  doc["results"] = std::move(results);
  return doc;
}

std::string render_document(const OrderedJson& document) {
  return dump_json(document, 2) + "\n";
}

std::string dump_json(const OrderedJson& value, int indent) {
  return value.dump(indent, ' ', false, OrderedJson::error_handler_t::replace);
}

}  // namespace loom
