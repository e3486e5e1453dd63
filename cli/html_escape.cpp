#include "cli/html_escape.hpp"

#include <fmt/format.h>

#include <cstdint>

#include "common/strings.hpp"

namespace loom::cli {
namespace {

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
    const std::size_t n = utf8_length(text, 0, &code);
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
          out.append(text.substr(0, n));
      }
    }
    text.remove_prefix(n);
  }
  return out;
}

}  // namespace loom::cli
