// The project's one FNV-1a (64 bit) and its one SplitMix64: every fingerprint, signature hash and
// seeded stream that must be recomputable from a printed number uses these. Header-only, no
// dependencies (the kernels, the fuzz targets and the tools all include it).
#pragma once

#include <cstdint>
#include <span>

namespace mxdiff {

// FNV-1a, 64 bit (offset basis and prime of the FNV specification).
inline constexpr uint64_t kFnv1a64Basis = 0xcbf29ce484222325ull;
inline constexpr uint64_t kFnv1a64Prime = 0x100000001b3ull;

constexpr uint64_t Fnv1a64Mix(uint64_t hash, uint8_t byte) { return (hash ^ byte) * kFnv1a64Prime; }

// The low `bytes` bytes of `value`, least significant first.
constexpr uint64_t Fnv1a64MixLittleEndian(uint64_t hash, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) hash = Fnv1a64Mix(hash, uint8_t(value >> (8 * i)));
  return hash;
}

constexpr uint64_t Fnv1a64(std::span<const uint8_t> bytes, uint64_t hash = kFnv1a64Basis) {
  for (uint8_t byte : bytes) hash = Fnv1a64Mix(hash, byte);
  return hash;
}

// Sebastiano Vigna's SplitMix64 (splitmix64.c): tiny and fully specified, so a stream can be
// recomputed in any language from the printed seed. A UniformRandomBitGenerator.
class SplitMix64 {
 public:
  using result_type = uint64_t;
  static constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;

  // The output function alone: SplitMix64 output number i of seed s is Finalize(s + i * kGamma).
  static constexpr uint64_t Finalize(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  constexpr explicit SplitMix64(uint64_t seed) : state_(seed) {}
  constexpr uint64_t Next() { return Finalize(state_ += kGamma); }
  constexpr uint64_t operator()() { return Next(); }
  // Next() % n: the modulo bias is below 2^-40 for n below 2^24.
  constexpr uint64_t Below(uint64_t n) { return Next() % n; }
  static constexpr uint64_t min() { return 0; }
  static constexpr uint64_t max() { return ~uint64_t{0}; }

 private:
  uint64_t state_;
};

}  // namespace mxdiff
