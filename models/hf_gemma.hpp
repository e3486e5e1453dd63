#pragma once
// Google's Gemma family as HuggingFace configs describe it (internal to models/, used by
// model_loader.cpp): `gemma` (Gemma 1), `gemma2`, `gemma3_text` and `gemma3` (the multimodal
// config, whose decoder is its `text_config`).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/hf_reader.hpp"
#include "models/model_spec.hpp"

namespace loom::models::detail {

/// Whether `type` is a Gemma model_type: gemma, gemma2, gemma3, gemma3_text.
bool is_gemma_type(const std::string& type);

/// The decoder's config of Gemma `config` (model_type `type`) as transformers reads it: a
/// gemma3 config's text_config, with the keys a published config leaves to its config class
/// filled from that class's defaults. A gemma3 vision tower is set aside with a sentence in
/// `notes`.
nlohmann::json gemma_decoder_config(const nlohmann::json& config, const std::string& type,
                                    const std::string& origin, std::vector<std::string>& notes);

/// The Gemma architecture on `m`, whose sizes are read: GeGLU, the scaled embedding, tied
/// embeddings; Gemma 2/3's sandwich norms and soft-capping; Gemma 3's query/key norms.
void read_hf_gemma(HfReader& r, const std::string& type, const std::string& origin, ModelSpec& m);

}  // namespace loom::models::detail
