#pragma once
// Small string utilities shared by every parser: did-you-mean suggestions and joining.
#include <string>
#include <string_view>
#include <vector>

namespace loom {

/// Levenshtein edit distance between a and b (case-sensitive).
int edit_distance(std::string_view a, std::string_view b);

/// The closest of `candidates` to `word`, or "" when none is close enough to suggest.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

/// The elements joined with `sep`.
std::string join(const std::vector<std::string>& items, std::string_view sep);

/// Lower-cased copy (ASCII).
std::string to_lower(std::string_view text);

}  // namespace loom
