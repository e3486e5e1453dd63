#include "strategies/step/timeline_links.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <optional>
#include <sstream>

namespace loom::strategies {
namespace {

// "mb3" -> "3" when `token` is `prefix` followed by digits only.
std::optional<std::string> numbered(const std::string& token, const std::string& prefix) {
  if (token.size() <= prefix.size() || token.compare(0, prefix.size(), prefix) != 0)
    return std::nullopt;
  const std::string rest = token.substr(prefix.size());
  for (char c : rest)
    if (c < '0' || c > '9') return std::nullopt;
  return rest;
}

std::string pass_name(const std::string& token) {
  if (token == "F") return "forward";
  if (token == "B") return "backward";
  if (token == "W") return "backward (weight gradients)";
  if (token == "R") return "recompute";
  return "";
}

}  // namespace

std::vector<std::pair<std::string, std::string>> slice_args(const sim::Engine& engine,
                                                            sim::TaskId task,
                                                            const std::string& label) {
  std::vector<std::pair<std::string, std::string>> args;
  std::istringstream words(label);
  std::string token, previous;
  bool first = true;
  while (words >> token) {
    if (first && !pass_name(token).empty()) args.emplace_back("pass", pass_name(token));
    if (auto mb = numbered(token, "mb")) args.emplace_back("micro_batch", *mb);
    if (auto c = numbered(token, "c")) args.emplace_back("chunk", *c);
    if (previous == "layers" || previous == "layer") args.emplace_back("layers", token);
    previous = token;
    first = false;
  }
  if (const sim::TaskNote* n = engine.note(task)) {
    args.emplace_back("op", sim::to_string(n->op));
    args.emplace_back("bytes", fmt::format("{}", static_cast<long long>(std::llround(n->bytes))));
    args.emplace_back("group_size", fmt::format("{}", n->group_size));
    std::string ranks = fmt::format("{}", fmt::join(n->ranks, ","));
    if (n->group_size > static_cast<int>(n->ranks.size())) ranks += ",...";
    args.emplace_back("ranks", ranks);
    if (n->count > 1) args.emplace_back("collectives", fmt::format("{}", n->count));
  }
  return args;
}

void link_dependants(const sim::Engine& engine, const SliceIndex& slices, StepReport& r) {
  for (const auto& [key, from] : slices) {
    const auto [task, rank] = key;
    if (engine.note(task) == nullptr) continue;  // compute: its order on the stream says it
    for (sim::TaskId next : engine.dependants(task)) {
      const auto it = slices.find({next, rank});
      if (it != slices.end() && it->second != from) r.timeline_flows.push_back({from, it->second});
    }
  }
}

}  // namespace loom::strategies
