#include "cli/error_line.hpp"

#include <fmt/format.h>

#include "common/limits.hpp"
#include "common/strings.hpp"

namespace loom::cli {

std::string error_line(std::string_view label, std::string_view message) {
  return fmt::format("loom: {}: {}\n", label, printable(message, MAX_MESSAGE_BYTES));
}

}  // namespace loom::cli
