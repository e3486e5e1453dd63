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
  return document.dump(2) + "\n";
}

}  // namespace loom
