#pragma once
// The versioned JSON document every `--format json` prints (DESIGN.md "Contracts"):
// {schema_version, tool, version, context, results}. Include only from .cpp files.
#include <nlohmann/json.hpp>

#include <string>

namespace loom {

using OrderedJson = nlohmann::ordered_json;

/// Wraps `context` and `results` in the schema-versioned envelope. A whole number under a key
/// naming bytes ("bytes", "*_bytes", "*_bytes_per_*", arrays under them) is written as an integer.
OrderedJson make_document(OrderedJson context, OrderedJson results);

/// The document serialised with two-space indent and a trailing newline (see dump_json).
std::string render_document(const OrderedJson& document);

/// `value` serialised for output (indent < 0: compact). A byte that is not UTF-8 (only a file
/// path from the command line can hold one) is written as U+FFFD instead of throwing.
std::string dump_json(const OrderedJson& value, int indent);

}  // namespace loom
