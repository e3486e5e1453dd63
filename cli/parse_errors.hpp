#pragma once
// CLI11's parse errors in loom's words. CLI11 throws one exception type per kind of mistake
// (CLI/Error.hpp: ArgumentMismatch, ExtrasError, RequiredError, ConversionError,
// ValidationError, ExcludesError, RequiresError); each is mapped here to one line that names
// the flag, what it takes and the fix, so that no "At Most 1 required but received 2" reaches
// the user.
#include <CLI/CLI.hpp>

#include <string>

namespace loom::cli {

/// The one-line message for a CLI11 parse error raised while parsing `root`: names the flag (or
/// argument, or subcommand), what it takes and how to fix the command line.
std::string explain_parse_error(const CLI::ParseError& e, const CLI::App& root);

}  // namespace loom::cli
