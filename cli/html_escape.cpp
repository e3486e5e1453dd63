#include "cli/html_escape.hpp"

#include <fmt/format.h>

#include <cstdint>

namespace loom::cli {
namespace {

// Length of the well-formed UTF-8 sequence at the start of `s` (RFC 3629: no overlong forms,
// no surrogates, nothing above U+10FFFF) and its code point; 0 when the first byte does not
// start one.
int utf8_sequence(std::string_view s, char32_t& code) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char b0 = byte(0);
  int n = 0;
  char32_t min = 0;
  if (b0 < 0x80) {
    code = b0;
    return 1;
  } else if ((b0 & 0xE0) == 0xC0) {
    n = 2, min = 0x80, code = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3, min = 0x800, code = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4, min = 0x10000, code = b0 & 0x07;
  } else {
    return 0;
  }
  if (s.size() < static_cast<size_t>(n)) return 0;
  for (int i = 1; i < n; ++i) {
    if ((byte(static_cast<size_t>(i)) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(static_cast<size_t>(i)) & 0x3F);
  }
  if (code < min || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
  return n;
}

// Code points shown as an escape rather than themselves: they either do not render
// (controls) or change how the text around them renders (bidirectional overrides).
bool invisible(char32_t c, bool keep_newlines) {
  if (c == '\t' || (keep_newlines && c == '\n')) return false;
  if (c < 0x20 || (c >= 0x7F && c <= 0x9F)) return true;
  if ((c >= 0x202A && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069)) return true;
  return c == 0xFFFE || c == 0xFFFF;
}

}  // namespace

std::string html_escape(std::string_view text, bool keep_newlines) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    char32_t code = 0;
    const int n = utf8_sequence(text, code);
    if (n == 0) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(text[0]));
      text.remove_prefix(1);
      continue;
    }
    if (invisible(code, keep_newlines)) {
      out += code < 0x80 ? fmt::format("\\x{:02x}", static_cast<std::uint32_t>(code))
                         : fmt::format("\\u{:04x}", static_cast<std::uint32_t>(code));
    } else {
      switch (code) {
        case '&':
          out += "&amp;";
          break;
        case '<':
          out += "&lt;";
          break;
        case '>':
          out += "&gt;";
          break;
        case '"':
          out += "&quot;";
          break;
        case '\'':
          out += "&#39;";
          break;
        default:
          out.append(text.substr(0, static_cast<size_t>(n)));
      }
    }
    text.remove_prefix(static_cast<size_t>(n));
  }
  return out;
}

}  // namespace loom::cli
