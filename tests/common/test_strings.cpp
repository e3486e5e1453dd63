// printable(): what every error message and every name derived from a path goes through.
#include <doctest/doctest.h>

#include <string>

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
