#include "common/strings.hpp"

#include <algorithm>
#include <cctype>

namespace loom {

int edit_distance(std::string_view a, std::string_view b) {
  std::vector<int> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    int diagonal = row[0];
    row[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      int above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  int best_distance = 0;
  const std::string lowered = to_lower(word);
  for (const auto& candidate : candidates) {
    int d = edit_distance(lowered, to_lower(candidate));
    if (best.empty() || d < best_distance) {
      best = candidate;
      best_distance = d;
    }
  }
  // A suggestion further than a third of the word away is noise, not help.
  int limit = std::max<int>(2, static_cast<int>(word.size()) / 3);
  return (!best.empty() && best_distance <= limit) ? best : std::string();
}

std::string join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += items[i];
  }
  return out;
}

std::string to_lower(std::string_view text) {
  std::string out(text);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace loom
