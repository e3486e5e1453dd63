#pragma once
// The small grammars of single flag values that the commands parse themselves, declared here so
// that their tests and the flag fuzz target (tests/fuzz/fuzz_flags.cpp) reach the very parser the
// command uses. Each throws ValidationError naming its flag on a malformed or out-of-range value.
#include <string>
#include <vector>

namespace loom::cli {

/// `loom plan --tokens`: "15T" -> 1.5e13, a positive count with an optional K, M, B (or G) or T
/// suffix (powers of 1000), at most MAX_TRAINING_TOKENS. Defined in cmd_plan.cpp.
double parse_tokens(const std::string& text);

/// `loom collective --group`: "0,1,2,3", "0-7" or "0-3,8-11" as ranks in the order given, at
/// most MAX_CLUSTER_GPUS of them. Defined in cmd_collective.cpp.
std::vector<int> parse_group(const std::string& text);

}  // namespace loom::cli
