#pragma once
// Gzip decompression for measurement files the profiler writes compressed (`*.json.gz`).
// zlib stays inside gzip.cpp: this header is all the rest of loom sees.
#include <cstdint>
#include <string>
#include <string_view>

namespace loom::calibration {

/// Whether `data` starts with the gzip magic bytes (1f 8b, RFC 1952).
bool is_gzip(std::string_view data);

/// The decompressed content of gzip `data` (every member of a multi-member file, as
/// `gzip -d` gives). `file` names it in errors. Throws CalibrationError naming the file and the
/// compressed byte offset on corrupt or truncated data, and naming the limit when the content
/// exceeds `max_bytes`.
std::string gunzip(std::string_view data, const std::string& file, std::int64_t max_bytes);

}  // namespace loom::calibration
