#pragma once
// What every libFuzzer target in tests/fuzz shares. A target feeds one input to one of
// loom's readers and uses what it returns; a loom::Error that is bad input or infeasible
// (exit 2 or 3) is a normal outcome, provided its message keeps the promise (one printable
// line, bounded). Anything else is a finding: another exception (libFuzzer reports it as
// uncaught), an InternalError (exit 1, a bug), a crash, a sanitizer report or a hang.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/error.hpp"
#include "common/limits.hpp"
#include "common/strings.hpp"

namespace loom::fuzz {

/// The fuzzer's bytes as a string.
inline std::string text_of(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

/// Aborts (a finding) unless `e` is an input error whose message is one printable line.
inline void check_error(const Error& e) {
  const std::string message = e.what();
  if (e.exit_code() == ExitCode::INTERNAL) {
    std::fprintf(stderr, "loom fuzz: internal error (exit 1): %s\n", message.c_str());
    std::abort();
  }
  const bool one_line = !message.empty() &&
                        message.size() <= static_cast<std::size_t>(MAX_MESSAGE_BYTES) + 64 &&
                        is_printable(message);
  if (!one_line) {
    std::fprintf(stderr, "loom fuzz: error message is not one printable line: %s\n",
                 printable(message, 4096).c_str());
    std::abort();
  }
}

/// Runs `body` on one input; returns 0 as LLVMFuzzerTestOneInput must.
template <typename Body>
int guarded(Body&& body) {
  try {
    body();
  } catch (const Error& e) {
    check_error(e);
  }
  return 0;
}

}  // namespace loom::fuzz
