#include "cli/field_flags.hpp"

#include <algorithm>

namespace loom::cli {

std::string flag_of(std::string_view key) {
  // Keys whose flag is not "--" + key.
  if (key == "algorithm") return "--algo";
  std::string flag = "--" + std::string(key);
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

}  // namespace loom::cli
