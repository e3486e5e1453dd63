#pragma once
// The text of strategies/bands/track_record.json, compiled into loom: CMake writes
// track_record_text.cpp in the build folder from the JSON (bands/embed_track_record.cmake),
// again whenever the JSON changes.

namespace loom::strategies {

/// The committed track record, as JSON text.
extern const char* const TRACK_RECORD_JSON;

}  // namespace loom::strategies
