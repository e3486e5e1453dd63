#pragma once
// Every file loom writes besides stdout (reports, traces, charts, calibration profiles)
// replaces its path in one step: the content goes to a temporary file in the same folder,
// is flushed to disk, and is renamed over the path. A full disk or a killed process leaves
// the old file whole (or no file), never a partial one.
#include <optional>
#include <string>
#include <string_view>

namespace loom {

/// Replaces the file at `path` with `content` atomically (see file comment); a new file gets
/// the permissions a plain create would (0666 less the umask), an existing one keeps its
/// own; a symbolic link is written through (its target is replaced). A path that exists and
/// is not a regular file (/dev/null, a FIFO) is written in place. Returns nullopt on success,
/// else the reason, worded by the system ("No space left on device"); nothing is left behind.
std::optional<std::string> replace_file(const std::string& path, std::string_view content);

}  // namespace loom
