#pragma once
// The one line loom prints on stderr for an error, written in one place: cli/main.cpp (every
// command) and the MPI ranks of `loom search` (cli/search_shards.cpp), which report an error
// before MPI_Abort takes them down.
#include <string>
#include <string_view>

namespace loom::cli {

/// "loom: <label>: <message>" and a line feed, the message made one printable line of at most
/// MAX_MESSAGE_BYTES (common/limits.hpp): loom::Error messages are so already, CLI11's and the
/// standard library's may quote any input. `label` is e.g. "error" or "error (rank 3)".
std::string error_line(std::string_view label, std::string_view message);

}  // namespace loom::cli
