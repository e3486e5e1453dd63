// The names users type for a GPU: catalog keys, short aliases, the catalog's display names
// and what vendors and nvidia-smi print; and the suggestion for a name loom does not know,
// which keeps the GPU family. Split from gpu_catalog.cpp (the datasheets).
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "common/limits.hpp"
#include "common/strings.hpp"
#include "topologies/gpu_catalog.hpp"

namespace loom::topo {
namespace {
// Short names users type, mapped to catalog keys.
const std::vector<std::pair<std::string, std::string>>& aliases() {
  static const std::vector<std::pair<std::string, std::string>> a = {
      {"a100", "a100-sxm-80gb"}, {"a100-40gb", "a100-sxm-40gb"}, {"a100-80gb", "a100-sxm-80gb"},
      {"h100", "h100-sxm"},      {"h200-sxm", "h200"},           {"4090", "rtx4090"},
  };
  return a;
}

// The names vendors, clouds and `nvidia-smi --query-gpu=name` / `rocm-smi` print, as
// normalized by vendor_key() (lower case, spaces and '_' as '-', the "nvidia-", "amd-",
// "instinct-", "geforce-" and "tesla-" words dropped). Not listed among the valid names: they
// are accepted, not advertised. nvidia-smi prints "NVIDIA H100 80GB HBM3" for the SXM5 board,
// "NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe", "NVIDIA H200", "NVIDIA B200".
const std::vector<std::pair<std::string, std::string>>& vendor_aliases() {
  static const std::vector<std::pair<std::string, std::string>> a = {
      {"h100-80gb-hbm3", "h100-sxm"},
      {"h100-sxm5-80gb", "h100-sxm"},
      {"h100-sxm5", "h100-sxm"},
      {"h100-80gb", "h100-sxm"},
      {"h100-sxm-80gb", "h100-sxm"},
      {"h100-pcie-80gb", "h100-pcie"},
      {"h100-80gb-pcie", "h100-pcie"},
      {"h100-nvl-94gb", "h100-nvl"},
      {"a100-sxm4-80gb", "a100-sxm-80gb"},
      {"a100-sxm4-40gb", "a100-sxm-40gb"},
      {"a100-sxm4", "a100-sxm-80gb"},
      {"a100-80gb-pcie", "a100-pcie-80gb"},
      {"a100-40gb-pcie", "a100-pcie-40gb"},
      {"a100-pcie", "a100-pcie-80gb"},
      {"h200-141gb", "h200"},
      {"h200-sxm-141gb", "h200"},
      {"h200-nvl-141gb", "h200-nvl"},
      {"rtx-4090", "rtx4090"},
      {"l40s-48gb", "l40s"},
      {"mi300", "mi300x"},
  };
  return a;
}

// `name` as vendor_aliases() spells it.
std::string vendor_key(std::string_view name) {
  std::string key;
  for (char c : to_lower(name)) {
    const char d = (c == ' ' || c == '_') ? '-' : c;
    if (d == '-' && (key.empty() || key.back() == '-')) continue;
    key += d;
  }
  while (!key.empty() && key.back() == '-') key.pop_back();
  for (bool dropped = true; dropped;) {
    dropped = false;
    for (const char* word : {"nvidia-", "amd-", "instinct-", "geforce-", "tesla-"}) {
      if (key.rfind(word, 0) == 0) {
        key = key.substr(std::string_view(word).size());
        dropped = true;
      }
    }
  }
  return key;
}

// The family of a GPU name: its first '-'-separated word holding a digit, without an "rtx"
// prefix ("h100-80gb" -> "h100", "dgx-b200" -> "b200", "rtx4090" -> "4090"); "" when none.
std::string gpu_family(std::string_view name) {
  const std::string key = vendor_key(name);
  for (std::size_t start = 0; start < key.size();) {
    const std::size_t end = std::min(key.find('-', start), key.size());
    std::string word = key.substr(start, end - start);
    if (word.find_first_of("0123456789") != std::string::npos)
      return word.rfind("rtx", 0) == 0 ? word.substr(3) : word;
    start = end + 1;
  }
  return "";
}

}  // namespace

std::vector<std::string> gpu_names() {
  std::vector<std::string> names;
  for (const auto& g : gpu_catalog()) names.push_back(g.name);
  for (const auto& [alias, key] : aliases()) names.push_back(alias);
  std::sort(names.begin(), names.end());
  return names;
}

std::optional<std::string> gpu_key(std::string_view name) {
  const std::string lower = to_lower(name), vendor = vendor_key(name);
  for (const auto& g : gpu_catalog())
    if (g.name == lower || g.name == vendor) return g.name;
  for (const auto& table : {aliases(), vendor_aliases()}) {
    for (const auto& [alias, target] : table)
      if (alias == lower || alias == vendor) return target;
  }
  // A catalog entry's display name as printed ("H100 SXM5 80GB").
  for (const auto& g : gpu_catalog())
    if (vendor_key(g.display_name) == vendor) return g.name;
  return std::nullopt;
}

std::string suggest_gpu_name(std::string_view name, const std::vector<std::string>& valid) {
  // Same family first: "H100-96GB" is an H100 mistyped, not an A100 one letter away.
  const std::string family = gpu_family(name);
  std::vector<std::string> kin;
  for (const auto& v : valid)
    if (!family.empty() && gpu_family(v) == family) kin.push_back(v);
  // Else a family one edit away with the same maker's letter ("b20" -> b200, not "v100" -> a100).
  std::vector<std::string> near;
  const auto letters = [](const std::string& f) {
    return f.substr(0, f.find_first_of("0123456789"));
  };
  for (const auto& v : valid) {
    const std::string other = gpu_family(v);
    if (!family.empty() && other != family && letters(other) == letters(family) &&
        edit_distance(other, family) <= 1)
      near.push_back(v);
  }
  if (kin.empty()) kin = near;
  if (!kin.empty()) {
    const std::string close = did_you_mean(to_lower(name), kin);
    if (!close.empty()) return close;
    return *std::min_element(kin.begin(), kin.end(), [](const auto& a, const auto& b) {
      return a.size() != b.size() ? a.size() < b.size() : a < b;
    });
  }
  if (!family.empty()) return "";  // a family loom does not know: no look-alike from another
  return did_you_mean(to_lower(name), valid);
}

ValidationError unknown_gpu(std::string_view field, std::string_view name,
                            const std::vector<std::string>& valid) {
  const std::string suggestion = suggest_gpu_name(name, valid);
  return ValidationError(
      std::string(field),
      fmt::format("{}: unknown name '{}'{}; valid: {}", field, printable(name, MAX_ECHO_BYTES),
                  suggestion.empty() ? "" : fmt::format(" (did you mean '{}'?)", suggestion),
                  join(valid, ", ")));
}

const GpuSpec& find_gpu(std::string_view name, std::string_view field) {
  if (const auto key = gpu_key(name)) {
    for (const auto& g : gpu_catalog())
      if (g.name == *key) return g;
  }
  throw unknown_gpu(field, name, gpu_names());
}

}  // namespace loom::topo
