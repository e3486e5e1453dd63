#pragma once
// Where models come from: built-in presets (registered by name with a description), loom
// model JSON files (docs/models.md), and HuggingFace config.json files recognised by their
// keys and translated by import_hf_config. The rest of loom sees only ModelSpec.
#include <string>
#include <vector>

#include "common/preset_info.hpp"
#include "models/model_spec.hpp"

namespace loom::models {

/// Every model preset, in a fixed order (for `loom presets models`).
std::vector<PresetInfo> model_presets();
/// The preset names, in the same order.
std::vector<std::string> model_preset_names();
/// The preset called `name`; throws ValidationError::unknown_name (field `field`) listing
/// the valid names with a did-you-mean hint.
ModelSpec model_preset(const std::string& name, const std::string& field = "model");

/// Resolves a model argument: a preset name, or a path to a loom model JSON or a HuggingFace
/// config.json (a HF config is recognised by "model_type"/"architectures"). The result is
/// validated. Throws ValidationError naming `field` (unknown preset), ConfigError (missing
/// file, malformed JSON with line/column, unknown key with did-you-mean, bad value).
ModelSpec load_model(const std::string& arg, const std::string& field = "model");

/// Loads a loom model JSON file; throws ConfigError naming the file and JSON pointer.
ModelSpec load_model_file(const std::string& path);
/// Parses loom model JSON text; `origin` names it in errors.
ModelSpec parse_model_json(const std::string& text, const std::string& origin);
/// Translates HuggingFace config.json text (llama, mistral, mixtral, qwen2, qwen2_moe,
/// qwen3, qwen3_moe, deepseek_v3); unknown model_type -> ValidationError listing these.
ModelSpec import_hf_config(const std::string& text, const std::string& origin);
/// The HuggingFace model_type values import_hf_config understands.
const std::vector<std::string>& hf_model_types();

}  // namespace loom::models
