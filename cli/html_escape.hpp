#pragma once
// Escaping of untrusted text for the HTML report: model, cluster and file names, labels and
// error-free rendering of bytes that are not text (control characters, invalid UTF-8).
#include <string>
#include <string_view>

namespace loom::cli {

/// `text` as HTML character data or a double- or single-quoted attribute value: & < > " '
/// become entities; valid UTF-8 passes through; control characters (C0 but tab, and newline
/// when `keep_newlines`; DEL; C1), bidirectional-override characters and bytes that are not
/// valid UTF-8 become visible escapes ("\x1b", "\u202e"). Never throws on any input.
std::string html_escape(std::string_view text, bool keep_newlines = false);

}  // namespace loom::cli
