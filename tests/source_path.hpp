#pragma once
// A checked-in file's path: the source tree (LOOM_SOURCE_DIR, set by tests/CMakeLists.txt)
// joined with `rel`, e.g. source_path("examples/models/tiny-gpt.json").
#include <string>

namespace loom::testing {

inline std::string source_path(const std::string& rel) {
  return std::string(LOOM_SOURCE_DIR) + "/" + rel;
}

}  // namespace loom::testing
