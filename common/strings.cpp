#include "common/strings.hpp"

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdlib>

namespace loom {

namespace {

// The edit distance of a and b when it is at most `bound`, else any value above `bound`: strings
// whose lengths differ by more than the bound are that far apart at least, and once a whole row
// of the table is above the bound every later one is too (rows never decrease below their
// minimum), so the table stops there.
int edit_distance_within(std::string_view a, std::string_view b, int bound) {
  const auto diff = static_cast<std::ptrdiff_t>(a.size()) - static_cast<std::ptrdiff_t>(b.size());
  if (std::abs(diff) > bound) return bound + 1;
  std::vector<int> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    int diagonal = row[0];
    row[0] = static_cast<int>(i);
    int lowest = row[0];
    for (size_t j = 1; j <= b.size(); ++j) {
      int above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
      lowest = std::min(lowest, row[j]);
    }
    if (lowest > bound) return bound + 1;
  }
  return row[b.size()];
}

}  // namespace

int edit_distance(std::string_view a, std::string_view b) {
  // No distance exceeds the longer string's length, so that bound never cuts the table short.
  return edit_distance_within(a, b, static_cast<int>(std::max(a.size(), b.size())));
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  if (word.size() > 64) return {};  // not a typo of a name, and edit distance is quadratic
  // A suggestion further than a third of the word away is noise, not help. Only candidates
  // within that distance can be the answer, and only those closer than the best so far can
  // replace it, so each distance is computed up to that bound (the Megatron import holds 865
  // flag names: an unknown flag compared them all in full).
  const int limit = std::max<int>(2, static_cast<int>(word.size()) / 3);
  std::string best;
  int best_distance = limit + 1;
  const std::string lowered = to_lower(word);
  for (const auto& candidate : candidates) {
    const int bound = best_distance - 1;
    if (bound < 0) break;
    const int d = edit_distance_within(lowered, to_lower(candidate), bound);
    if (d <= bound) {
      best = candidate;
      best_distance = d;
    }
  }
  return best;
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

std::size_t utf8_length(std::string_view text, std::size_t i, char32_t* code) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b = byte(i);
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (b < 0x80) {
    n = 1;
  } else if (b >= 0xC2 && b <= 0xDF) {
    n = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    n = 3;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    n = 4;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > text.size()) return 0;
  if (n > 1 && (byte(i + 1) < lo || byte(i + 1) > hi)) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  if (code != nullptr) {
    static constexpr unsigned char LEAD_BITS[] = {0x7F, 0x1F, 0x0F, 0x07};
    *code = b & LEAD_BITS[n - 1];
    for (std::size_t k = 1; k < n; ++k) *code = (*code << 6) | (byte(i + k) & 0x3F);
  }
  return n;
}

namespace {

// The escape for the character of `length` bytes at text[i], or "" when it prints as itself.
std::string escape_of(std::string_view text, std::size_t i, std::size_t length) {
  static const char* hex = "0123456789abcdef";
  const auto b = static_cast<unsigned char>(text[i]);
  if (length == 0) return {'\\', 'x', hex[b >> 4], hex[b & 15]};
  if (length == 1) {
    if (b == '\n') return "\\n";
    if (b == '\r') return "\\r";
    if (b == '\t') return "\\t";
    if (b < 0x20 || b == 0x7F) return {'\\', 'x', hex[b >> 4], hex[b & 15]};
    return "";
  }
  // C1 controls U+0080..U+009F are C2 80..C2 9F.
  const auto second = static_cast<unsigned char>(text[i + 1]);
  if (length == 2 && b == 0xC2 && second <= 0x9F)
    return {'\\', 'u', '0', '0', hex[second >> 4], hex[second & 15]};
  // Characters that reorder, hide or break the line around them (Trojan Source, CVE-2021-
  // 42574): bidirectional marks, embeddings, overrides and isolates, zero-width characters,
  // the line and paragraph separators, the byte-order mark.
  char32_t code = 0;
  (void)utf8_length(text, i, &code);
  const bool hidden = code == 0x061C || (code >= 0x200B && code <= 0x200F) ||
                      (code >= 0x2028 && code <= 0x202E) || (code >= 0x2060 && code <= 0x2069) ||
                      code == 0xFEFF;
  if (hidden) {
    return {
        '\\',          'u', hex[(code >> 12) & 15], hex[(code >> 8) & 15], hex[(code >> 4) & 15],
        hex[code & 15]};
  }
  return "";
}

}  // namespace

std::string printable(std::string_view text, std::size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes == std::string::npos ? text.size() : max_bytes));
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t length = utf8_length(text, i);
    const std::string escape = escape_of(text, i, length);
    const std::size_t adds = escape.empty() ? length : escape.size();
    if (out.size() + adds > max_bytes) {
      out += "...";
      return out;
    }
    if (escape.empty())
      out.append(text.substr(i, length));
    else
      out += escape;
    i += length == 0 ? 1 : length;
  }
  return out;
}

bool is_printable(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t length = utf8_length(text, i);
    if (length == 0 || !escape_of(text, i, length).empty()) return false;
    i += length;
  }
  return true;
}

}  // namespace loom
