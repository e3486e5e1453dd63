#pragma once
// What a registry of named presets (models, clusters) says about each entry, for listings
// (`loom presets`) and unknown-name errors. Shared so every registry looks the same.
#include <string>
#include <vector>

namespace loom {

/// A registered preset: its name and one line saying what it is and where it comes from.
struct PresetInfo {
  std::string name;
  std::string description;
};

/// The names of `presets`, in the same order.
inline std::vector<std::string> preset_names(const std::vector<PresetInfo>& presets) {
  std::vector<std::string> names;
  names.reserve(presets.size());
  for (const auto& p : presets) names.push_back(p.name);
  return names;
}

}  // namespace loom
