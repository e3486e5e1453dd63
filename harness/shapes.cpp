#include "harness/shapes.hpp"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "harness/errors.hpp"

namespace loom::harness {

std::vector<GemmShape> standard_shapes() {
  std::vector<GemmShape> shapes;
  for (std::int64_t s = 256; s <= 16384; s *= 2) shapes.push_back({s, s, s, "square"});
  // (n, k) of the QKV/output/FFN projections: Llama-3-8B (hidden 4096, FFN 14336) and
  // Llama-3-70B (hidden 8192, FFN 28672), from their Hugging Face config.json.
  const std::int64_t nk[][2] = {{4096, 4096}, {14336, 4096}, {4096, 14336},
                                {8192, 8192}, {28672, 8192}, {8192, 28672}};
  for (std::int64_t tokens : {2048, 8192}) {
    for (const auto& [n, k] : nk) shapes.push_back({tokens, n, k, "transformer"});
  }
  return shapes;
}

std::vector<GemmShape> parse_shapes(const std::string& text, const std::string& file) {
  std::vector<GemmShape> shapes;
  std::istringstream in(text);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const size_t hash = line.find('#');
    std::istringstream fields(line.substr(0, hash));
    std::string first;
    if (!(fields >> first)) continue;  // blank or comment
    std::istringstream row(line.substr(0, hash));
    GemmShape s;
    if (!(row >> s.m >> s.n >> s.k) || s.m <= 0 || s.n <= 0 || s.k <= 0) {
      throw UsageError(fmt::format(
          "{}:{}: expected \"m n k\" (three positive integers), got \"{}\"", file, number, line));
    }
    std::getline(row >> std::ws, s.note);
    shapes.push_back(s);
  }
  if (shapes.empty()) {
    throw UsageError(fmt::format("{}: no shapes: give one \"m n k\" line per GEMM", file));
  }
  return shapes;
}

std::vector<GemmShape> read_shapes(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError(fmt::format("{}: cannot read the shapes file", path));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_shapes(text.str(), path);
}

}  // namespace loom::harness
