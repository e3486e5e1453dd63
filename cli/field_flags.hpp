#pragma once
// The one mapping from library field keys to CLI flags. Library code names fields by its
// own keys ("nodes", "algorithm"); the commands pass flag_names() where a library call
// takes a FieldNames so that its messages spell the flags the user typed.
#include <string>
#include <string_view>

#include "common/error.hpp"

namespace loom::cli {

/// The flag that sets library field `key`: "algorithm" -> "--algo", otherwise "--" + key
/// with '_' as '-' ("nodes" -> "--nodes").
std::string flag_of(std::string_view key);

/// Field names spelled as CLI flags (flag_of).
inline FieldNames flag_names() {
  return FieldNames(&flag_of);
}

}  // namespace loom::cli
