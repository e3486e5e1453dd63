#pragma once
// Files the CLI writes besides stdout (--report, --trace, --chart): the path is checked before
// any work starts, so a typo costs nothing, and the write replaces the file only once all of
// it reached the disk (a full disk is an error and leaves the old file, not a partial one).
#include <CLI/CLI.hpp>

#include <string>
#include <string_view>

namespace loom::cli {

/// Checks that `path` (given with `flag`) can be written without creating it: an existing
/// path must not be a directory and must be writable; a new one needs an existing, writable
/// directory. Throws ValidationError naming `flag` and the reason.
void check_output_path(const std::string& path, std::string_view flag);

/// The check of an output-file flag (--trace, --chart): an empty path is refused, as
/// check_output_path refuses it, instead of reading as the flag left out.
CLI::Validator output_path_check();

/// Replaces `path` with `content` in one step (common/file_output.hpp: a temporary file in
/// the same folder, renamed over it), so a failed write leaves the old file whole. Throws
/// ValidationError naming `flag`, the path and the system's reason when it cannot.
void write_output_file(const std::string& path, std::string_view content, std::string_view flag);

}  // namespace loom::cli
