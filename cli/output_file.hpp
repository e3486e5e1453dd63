#pragma once
// Files the CLI writes besides stdout (`--report`): the path is checked before any work
// starts, so a typo costs nothing, and the write is checked to the end (a full disk is an
// error, not a silently lost file).
#include <string>
#include <string_view>

namespace loom::cli {

/// Checks that `path` (given with `flag`) can be written without creating it: an existing
/// path must not be a directory and must be writable; a new one needs an existing, writable
/// directory. Throws ValidationError naming `flag` and the reason.
void check_output_path(const std::string& path, std::string_view flag);

/// Writes `content` to `path` (truncating it) and checks every byte reached it. Throws
/// ValidationError naming `flag`, the path and the system's reason when it cannot.
void write_output_file(const std::string& path, std::string_view content, std::string_view flag);

}  // namespace loom::cli
