// printable(): what every error message and every name derived from a path goes through;
// utf8_length(), the one UTF-8 decoder it and the HTML report's escaping share.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/limits.hpp"
#include "common/strings.hpp"

using namespace loom;

TEST_CASE("common::strings: printable escapes control characters and bytes that are not UTF-8") {
  CHECK(printable("plain text, ×, é, 日本") == "plain text, ×, é, 日本");
  CHECK(printable("a\nb\tc\rd") == "a\\nb\\tc\\rd");
  CHECK(printable("\x1b[31mred\x7f") == "\\x1b[31mred\\x7f");
  CHECK(printable(std::string("nul\0here", 8)) == "nul\\x00here");
  CHECK(printable("bad\xff\xfe") == "bad\\xff\\xfe");
  // C1 control U+0085 (C2 85); an overlong '/' (C0 AF); a UTF-16 surrogate (ED A0 80).
  CHECK(printable("\xc2\x85") == "\\u0085");
  CHECK(printable("\xc0\xaf") == "\\xc0\\xaf");
  CHECK(printable("\xed\xa0\x80") == "\\xed\\xa0\\x80");
  // A sequence cut short at the end.
  CHECK(printable("ok\xe6\x97") == "ok\\xe6\\x97");
  CHECK(is_printable("é ok"));
  CHECK_FALSE(is_printable("a\nb"));
  CHECK_FALSE(is_printable("\xff"));
}

TEST_CASE("common::strings: utf8_length decodes well-formed UTF-8 and nothing else") {
  // Code points from the Unicode charts: é U+00E9, → U+2192, 🐑 U+1F411.
  char32_t code = 0;
  CHECK(utf8_length("A", 0, &code) == 1);
  CHECK(code == U'A');
  CHECK(utf8_length("x\xc3\xa9", 1, &code) == 2);
  CHECK(code == 0xE9);
  CHECK(utf8_length("\xe2\x86\x92", 0, &code) == 3);
  CHECK(code == 0x2192);
  CHECK(utf8_length("\xf0\x9f\x90\x91", 0, &code) == 4);
  CHECK(code == 0x1F411);
  CHECK(utf8_length("\xf4\x8f\xbf\xbf", 0, &code) == 4);  // U+10FFFF, the last
  CHECK(code == 0x10FFFF);
  CHECK(utf8_length("\xc3", 0) == 0);              // cut off
  CHECK(utf8_length("\xc0\xaf", 0) == 0);          // overlong '/'
  CHECK(utf8_length("\xe0\x80\xaf", 0) == 0);      // overlong '/'
  CHECK(utf8_length("\xed\xa0\x80", 0) == 0);      // a UTF-16 surrogate
  CHECK(utf8_length("\xf4\x90\x80\x80", 0) == 0);  // above U+10FFFF
  CHECK(utf8_length("\xe2\x86\x41", 0) == 0);      // 'A' is not a continuation byte
  CHECK(utf8_length("\x80", 0) == 0);              // a continuation byte first
  CHECK(utf8_length("\xff", 0) == 0);
}

TEST_CASE("common::strings: printable cuts at a character boundary") {
  CHECK(printable("abcdef", 4) == "abcd...");
  CHECK(printable("ab日本", 4) == "ab...");  // 日 is three bytes
  CHECK(printable("ab\ncd", 3) == "ab...");  // \n is two
  CHECK(printable("abc", 3) == "abc");
}

TEST_CASE("common::Error: a message is one printable line, long ones keep head and tail") {
  const Error e("line one\nline two \x1b[0m", ExitCode::BAD_INPUT);
  CHECK(std::string(e.what()) == "line one\\nline two \\x1b[0m");
  const std::string long_message = "head: " + std::string(10000, 'x') + "; the fix";
  const std::string m = Error(long_message, ExitCode::BAD_INPUT).what();
  CHECK(m.size() <= static_cast<size_t>(MAX_MESSAGE_BYTES) + 64);
  CHECK(m.rfind("head: ", 0) == 0);
  CHECK(m.find("; the fix") == m.size() - 9);
  CHECK(m.find("bytes left out") != std::string::npos);
}

TEST_CASE("common::strings: did_you_mean does not try on text far longer than any name") {
  CHECK(did_you_mean("hiden", {"hidden", "heads"}) == "hidden");
  CHECK(did_you_mean(std::string(100, 'h'), {"hidden"}).empty());
}

TEST_CASE("common::strings: characters that reorder or hide text are escaped (issue 34)") {
  // U+202E RIGHT-TO-LEFT OVERRIDE printed raw made "ab<RLO>cd" show as "abdc".
  CHECK(printable("ab\xE2\x80\xAE"
                  "cd") == "ab\\u202ecd");
  CHECK(printable("\xE2\x81\xA6x\xE2\x81\xA9") == "\\u2066x\\u2069");  // an isolate
  CHECK(printable("a\xE2\x80\x8B"
                  "b") == "a\\u200bb");  // zero width space
  CHECK(printable("a\xE2\x80\xA8"
                  "b") == "a\\u2028b");             // line separator
  CHECK(printable("\xEF\xBB\xBFx") == "\\ufeffx");  // byte-order mark
  CHECK(printable("\xD8\x9C") == "\\u061c");        // Arabic letter mark
  CHECK_FALSE(
      is_printable("ab\xE2\x80\xAE"
                   "cd"));
  // Other non-ASCII text is printable: a multiplication sign, an em dash, CJK.
  CHECK(is_printable("tp \xC3\x97 dp \xE2\x80\x94 \xE6\xA8\xA1\xE5\x9E\x8B"));
}

namespace {

// Levenshtein distance over the whole table, written here apart from the code under test.
int full_table_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<int>> d(a.size() + 1, std::vector<int>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j)
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
  return d[a.size()][b.size()];
}

}  // namespace

// did_you_mean bounds each distance by the best so far; it must answer as the plain rule does:
// the first candidate at the least distance, when that distance is within a third of the word.
TEST_CASE("common::strings: did_you_mean with bounded distances equals the plain rule") {
  std::uint64_t state = 12345;
  const auto next = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int>(state >> 33);
  };
  const auto word = [&] {
    std::string w(static_cast<size_t>(1 + next() % 12), 'a');
    for (auto& c : w) c = static_cast<char>('a' + next() % 4);
    return w;
  };
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<std::string> names(static_cast<size_t>(1 + next() % 20));
    for (auto& n : names) n = word();
    const std::string typed = word();
    std::string plain;
    int plain_d = 0;
    for (const auto& n : names) {
      const int d = full_table_distance(typed, n);
      CHECK(edit_distance(typed, n) == d);
      if (plain.empty() || d < plain_d) plain = n, plain_d = d;
    }
    if (plain_d > std::max<int>(2, static_cast<int>(typed.size()) / 3)) plain.clear();
    INFO(typed);
    CHECK(did_you_mean(typed, names) == plain);
  }
}

TEST_CASE("common::strings: edit_distance by hand") {
  CHECK(edit_distance("kitten", "sitting") == 3);  // two substitutions, one insertion
  CHECK(edit_distance("flaw", "lawn") == 2);       // a deletion and an insertion
  CHECK(edit_distance("", "abc") == 3);
  CHECK(edit_distance("abc", "") == 3);
  CHECK(edit_distance("same", "same") == 0);
}
