#include "strategies/plan/plan_json.hpp"

#include <fmt/format.h>

#include "common/json_util.hpp"
#include "common/strings.hpp"
#include "common/units.hpp"

namespace loom::strategies {
namespace {

std::vector<std::string> layer_list(ObjectReader& r, std::string_view key) {
  const auto& v = r.raw(key);
  std::vector<std::string> parts;
  bool ok = v.is_array();
  if (ok) {
    for (const auto& x : v) {
      if (!x.is_number_integer() || x.get<std::int64_t>() < 1) {
        ok = false;
        break;
      }
      parts.push_back(std::to_string(x.get<std::int64_t>()));
    }
  }
  if (!ok) r.fail(key, json_excerpt(v), "an array of positive layer counts, e.g. [20, 20]");
  return parts;
}

// A list of names (an array of strings, or one comma-separated string) as a comma list;
// `names` the field's valid names, the first two of which the error's example shows.
std::string name_list(ObjectReader& r, std::string_view key,
                      const std::vector<std::string>& names) {
  const auto& v = r.raw(key);
  if (v.is_string()) return v.get<std::string>();
  std::vector<std::string> parts;
  bool ok = v.is_array();
  if (ok) {
    for (const auto& x : v) {
      if (!x.is_string()) {
        ok = false;
        break;
      }
      parts.push_back(x.get<std::string>());
    }
  }
  if (!ok) {
    r.fail(key, json_excerpt(v),
           names.size() >= 2
               ? fmt::format("an array of names, e.g. [\"{}\", \"{}\"]", names[0], names[1])
               : std::string("an array of names"));
  }
  return join(parts, ",");
}

// The value of `field` in `r` as the table's type says, or nothing when a switch is off or
// a layer list is empty (both mean the default).
std::optional<PlanValue> read_field(ObjectReader& r, const PlanField& field) {
  const std::string_view key = field.key;
  switch (field.type) {
    case FieldType::SIZE:
    case FieldType::DERIVED:
      // A count that may be zero (field.min 0, e.g. layers offloaded) or a positive size.
      if (field.min == 0) return r.get_count_or(key, 0);
      return r.get_positive_int(key);
    case FieldType::STAGE:
      return r.get_count_or(key, 0);
    case FieldType::CHOICE:
      return r.get_enum(key, *field.names);
    case FieldType::SWITCH:
      if (r.get_bool_or(key, false)) return true;
      return std::nullopt;
    case FieldType::TOGGLE:
      return r.get_bool_or(key, true);
    case FieldType::BYTES:
      return bytes_text(r.get_quantity(key, Unit::BYTES));
    case FieldType::PERCENT:
      return r.get_number(key);
    case FieldType::NAME_LIST:
      return name_list(r, key, *field.names);
    case FieldType::TEXT:
      return r.get_string(key);
    case FieldType::LAYER_LIST: {
      const auto parts = layer_list(r, key);
      if (parts.empty()) return std::nullopt;  // what the writer prints for an even split
      return join(parts, ",");
    }
  }
  return std::nullopt;
}

}  // namespace

PlanInput read_plan_json(const std::string& path) {
  return parse_plan_json(read_text_file(path, "plan"), path);
}

PlanInput parse_plan_json(const std::string& text, const std::string& path) {
  const nlohmann::json doc = parse_json_text(text, path);
  // The document --print-config prints wraps the plan: {"plan": {...}}.
  const bool wrapped = doc.is_object() && doc.contains("plan") && doc["plan"].is_object();
  ObjectReader outer(doc, path, "");
  outer.allow({"$schema", "comment"});
  ObjectReader r = wrapped ? outer.child("plan") : outer;
  if (wrapped) r.allow({"comment"});
  PlanInput input = read_plan_fields(r);
  if (wrapped) outer.finish();
  return input;
}

PlanInput read_plan_fields(ObjectReader& r) {
  PlanInput input;
  for (const PlanField& field : plan_fields()) {
    if (!r.has(field.key)) continue;
    std::optional<PlanValue> value = read_field(r, field);
    if (!value) continue;
    input.set(field.key, std::move(*value),
              file_source(r.file(), r.pointer_of(field.key), std::string(field.key)));
  }
  r.finish();
  return input;
}

OrderedJson plan_to_json(const models::TrainingPlan& plan) {
  OrderedJson j;
  for (const PlanField& field : plan_fields()) {
    if (!field.get || (field.applies && !field.applies(plan))) continue;
    std::visit([&](const auto& v) { j[std::string(field.key)] = v; }, field.get(plan));
  }
  return j;
}

std::string render_plan_config(const models::TrainingPlan& plan) {
  OrderedJson doc;
  doc["plan"] = plan_to_json(plan);
  return doc.dump(2) + "\n";
}

}  // namespace loom::strategies
