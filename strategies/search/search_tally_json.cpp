// A SearchTally as JSON, both ways: the partial result of one shard of a search, to be
// merged with the others'. Doubles are written with nlohmann's shortest round-trip form,
// so a tally read back equals the one written, and merged tallies equal the whole.
#include <fmt/format.h>

#include <cmath>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "common/limits.hpp"
#include "common/strings.hpp"
#include "strategies/search/search.hpp"

namespace loom::strategies {
namespace {

constexpr int TALLY_SCHEMA = 1;
// Most candidates a tally keeps for the exact tier or the sample (--exact, --sample).
constexpr std::int64_t MAX_KEEP = std::int64_t{1} << 20;

nlohmann::json ranked_json(const std::vector<RankedId>& list) {
  nlohmann::json out = nlohmann::json::array();
  for (const RankedId& r : list) out.push_back({r.key, r.id});
  return out;
}

// The candidate ids of the space: 0 .. shapes x switch combinations - 1 (capped at 2^53).
std::int64_t candidate_count(const SearchSpace& space) {
  std::int64_t total = 0;
  if (__builtin_mul_overflow(space.shapes(), space.switch_combinations(), &total) ||
      total > MAX_JSON_INT)
    return MAX_JSON_INT;
  return total;
}

// [key, id] pairs: a finite key >= 0, a candidate id, at most `keep` of them.
std::vector<RankedId> ranked_from(ObjectReader& r, const char* key, std::int64_t keep,
                                  std::int64_t candidates) {
  const nlohmann::json& list = r.raw(key);
  if (!list.is_array() || static_cast<std::int64_t>(list.size()) > keep)
    r.fail(key, json_excerpt(list), fmt::format("a list of at most {} [key, id] pairs", keep));
  std::vector<RankedId> out;
  for (size_t i = 0; i < list.size(); ++i) {
    const nlohmann::json& item = list[i];
    const bool ok = item.is_array() && item.size() == 2 && item[0].is_number() &&
                    std::isfinite(item[0].get<double>()) && item[0].get<double>() >= 0 &&
                    item[1].is_number_integer() && item[1].get<std::int64_t>() >= 0 &&
                    item[1].get<std::int64_t>() < candidates;
    if (!ok) {
      r.fail(fmt::format("{}/{}", key, i), json_excerpt(item),
             fmt::format("[key, id]: a finite key >= 0 and a candidate id below {}", candidates));
    }
    out.push_back({item[0].get<double>(), item[1].get<std::int64_t>()});
  }
  return out;
}

// "invalid_by_field": field names and messages printable (they reach the terminal), counts
// within the invalid candidates.
void read_invalid_by_field(ObjectReader& r, SearchTally& t, std::int64_t candidates) {
  const nlohmann::json& by = r.raw("invalid_by_field");
  ObjectReader fields(by, r.file(), r.pointer_of("invalid_by_field"));
  for (const auto& [field, value] : by.items()) {
    fields.allow({field});
    if (field.size() > 64 || !is_printable(field))
      fields.fail(printable(field, MAX_ECHO_BYTES), "", "a plan field name");
    ObjectReader c = fields.child(field);
    InvalidCount& n = t.invalid_by_field[field];
    n.count = c.get_int_in_range("count", 1, t.invalid);
    n.first_id = c.get_int_in_range("first_id", 0, candidates - 1);
    n.example = c.get_string("example");
    if (n.example.size() > static_cast<size_t>(MAX_MESSAGE_BYTES))
      c.fail("example", json_excerpt(value.at("example")), "a message of one line");
    c.finish();
  }
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
  ObjectReader r(j, source, "");
  r.allow({"shard", "shards"});  // written by --shard, read by the merge
  r.get_int_in_range("schema", TALLY_SCHEMA, TALLY_SCHEMA);
  if (r.get_string("space") != space.fingerprint()) {
    throw ConfigError(source, "/space",
                      fmt::format("{}: a partial result of another search (its model, cluster "
                                  "or fixed plan flags differ); merge results of one search",
                                  source));
  }
  // Every count within what the space holds, so no sum of them overflows.
  const std::int64_t candidates = candidate_count(space);
  SearchTally t;
  t.shapes = r.get_int_in_range("shapes", 0, space.shapes());
  t.enumerated = r.get_int_in_range("enumerated", 0, candidates);
  t.invalid = r.get_int_in_range("invalid", 0, t.enumerated);
  t.out_of_memory = r.get_int_in_range("out_of_memory", 0, t.enumerated - t.invalid);
  t.fitting = r.get_int_in_range("fitting", 0, t.enumerated - t.invalid - t.out_of_memory);
  read_invalid_by_field(r, t, candidates);
  const nlohmann::json& peak = r.raw("min_peak_bytes");
  if (!peak.is_null()) {
    t.min_peak_bytes = r.get_number("min_peak_bytes");
    if (!(t.min_peak_bytes >= 0))
      r.fail("min_peak_bytes", json_excerpt(peak), "null or a number of bytes >= 0");
  }
  t.keep_best = r.get_int_in_range("keep_best", 0, MAX_KEEP);
  t.keep_sample = r.get_int_in_range("keep_sample", 0, MAX_KEEP);
  t.best = ranked_from(r, "best", t.keep_best, candidates);
  t.sample = ranked_from(r, "sample", t.keep_sample, candidates);
  r.finish();
  return t;
}

}  // namespace loom::strategies
