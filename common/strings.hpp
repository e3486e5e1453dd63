#pragma once
// Small string utilities shared by every parser: did-you-mean suggestions, joining, and
// making untrusted text safe to print on one line.
#include <cstddef>
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

/// The length (1 to 4) of the well-formed UTF-8 sequence starting at text[i], i < text.size()
/// (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF), or 0 when the bytes
/// there are not one; its code point goes to `*code` when `code` is given.
std::size_t utf8_length(std::string_view text, std::size_t i, char32_t* code = nullptr);

/// `text` made safe to print on one line of a terminal: control characters (C0, DEL, C1)
/// become escapes (\n, \x1b, \u0085), and so do characters that reorder or hide text
/// (bidirectional overrides and isolates, zero-width characters, U+2028/2029, the BOM:
/// \u202e); bytes that are not UTF-8 become \xff;
/// valid printable UTF-8 passes unchanged. Output beyond `max_bytes` is cut at a character
/// boundary and ends in "...".
std::string printable(std::string_view text, std::size_t max_bytes = std::string::npos);

/// Whether `text` is valid UTF-8 without control characters or the characters that reorder
/// or hide text (what printable() leaves alone).
bool is_printable(std::string_view text);

}  // namespace loom
