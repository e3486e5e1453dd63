#pragma once
// Seeded random draws that are pure functions of their keys (a seed and up to three
// integers: e.g. step, rank, purpose), so a result does not depend on the order in which a
// simulation asks for them: splitmix64 (Steele, Lea, Flood 2014, "Fast splittable
// pseudorandom number generators") over the mixed keys.
#include <cmath>
#include <cstdint>

namespace loom {

/// splitmix64's output function of `x`.
inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

/// A uniform draw in [0, 1) keyed by (seed, a, b, c).
inline double uniform_draw(std::uint64_t seed, std::uint64_t a, std::uint64_t b,
                           std::uint64_t c = 0) {
  const std::uint64_t x = splitmix64(splitmix64(splitmix64(splitmix64(seed) ^ a) ^ b) ^ c);
  return static_cast<double>(x >> 11) * 0x1.0p-53;  // 53 random mantissa bits
}

/// An exponential draw of mean `mean` (>= 0) keyed by (seed, a, b, c): -mean ln(1 - U).
inline double exponential_draw(double mean, std::uint64_t seed, std::uint64_t a, std::uint64_t b,
                               std::uint64_t c = 0) {
  return -mean * std::log1p(-uniform_draw(seed, a, b, c));
}

}  // namespace loom
