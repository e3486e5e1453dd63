// A SearchTally as JSON, both ways: the partial result of one shard of a search, to be
// merged with the others'. Doubles are written with nlohmann's shortest round-trip form,
// so a tally read back equals the one written, and merged tallies equal the whole.
#include <fmt/format.h>

#include <cmath>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "strategies/search/search.hpp"

namespace loom::strategies {
namespace {

constexpr int TALLY_SCHEMA = 1;

nlohmann::json ranked_json(const std::vector<RankedId>& list) {
  nlohmann::json out = nlohmann::json::array();
  for (const RankedId& r : list) out.push_back({r.key, r.id});
  return out;
}

std::vector<RankedId> ranked_from(const nlohmann::json& list, const std::string& source,
                                  const char* key) {
  std::vector<RankedId> out;
  if (!list.is_array())
    throw ConfigError::bad_value(source, fmt::format("/{}", key), "?", "a list");
  for (const auto& item : list) {
    if (!item.is_array() || item.size() != 2 || !item[0].is_number() ||
        !item[1].is_number_integer())
      throw ConfigError::bad_value(source, fmt::format("/{}", key), item.dump(), "[key, id] pairs");
    out.push_back({item[0].get<double>(), item[1].get<std::int64_t>()});
  }
  return out;
}

}  // namespace

std::string tally_to_json(const SearchTally& t, const SearchSpace& space) {
  nlohmann::json j;
  j["schema"] = TALLY_SCHEMA;
  j["space"] = space.fingerprint();
  j["shapes"] = t.shapes;
  j["enumerated"] = t.enumerated;
  j["invalid"] = t.invalid;
  j["out_of_memory"] = t.out_of_memory;
  j["fitting"] = t.fitting;
  nlohmann::json by = nlohmann::json::object();
  for (const auto& [field, c] : t.invalid_by_field)
    by[field] = {{"count", c.count}, {"first_id", c.first_id}, {"example", c.example}};
  j["invalid_by_field"] = by;
  // Infinity is not JSON: no valid plan at all is written as null.
  j["min_peak_bytes"] =
      std::isfinite(t.min_peak_bytes) ? nlohmann::json(t.min_peak_bytes) : nlohmann::json(nullptr);
  j["keep_best"] = t.keep_best;
  j["keep_sample"] = t.keep_sample;
  j["best"] = ranked_json(t.best);
  j["sample"] = ranked_json(t.sample);
  return j.dump() + "\n";
}

SearchTally tally_from_json(const std::string& text, const std::string& source,
                            const SearchSpace& space) {
  const nlohmann::json j = parse_json_text(text, source);
  try {
    if (j.at("schema").get<int>() != TALLY_SCHEMA)
      throw ConfigError::bad_value(source, "/schema", j.at("schema").dump(),
                                   std::to_string(TALLY_SCHEMA));
    if (j.at("space").get<std::string>() != space.fingerprint()) {
      throw ConfigError(source, "/space",
                        fmt::format("{}: a partial result of another search (its model, cluster "
                                    "or fixed plan flags differ); merge results of one search",
                                    source));
    }
    SearchTally t;
    t.shapes = j.at("shapes").get<std::int64_t>();
    t.enumerated = j.at("enumerated").get<std::int64_t>();
    t.invalid = j.at("invalid").get<std::int64_t>();
    t.out_of_memory = j.at("out_of_memory").get<std::int64_t>();
    t.fitting = j.at("fitting").get<std::int64_t>();
    for (const auto& [field, c] : j.at("invalid_by_field").items()) {
      t.invalid_by_field[field] = {c.at("count").get<std::int64_t>(),
                                   c.at("first_id").get<std::int64_t>(),
                                   c.at("example").get<std::string>()};
    }
    const auto& peak = j.at("min_peak_bytes");
    if (!peak.is_null()) t.min_peak_bytes = peak.get<double>();
    t.keep_best = j.at("keep_best").get<std::int64_t>();
    t.keep_sample = j.at("keep_sample").get<std::int64_t>();
    t.best = ranked_from(j.at("best"), source, "best");
    t.sample = ranked_from(j.at("sample"), source, "sample");
    return t;
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(source, "",
                      fmt::format("{}: not a loom search partial result ({})", source, e.what()));
  }
}

}  // namespace loom::strategies
