// One element of a tensor recipe's generator (tensor_recipe.h), as host/device functions
// (MXDIFF_HD): what the device materialization (tensor_recipe_device.h) runs per element, and
// tests/fuzz/tensor_recipe_test.cc checks on the host against GeneratedElement for every class
// and rare rate. Everything a class needs (the tables, the mixed seeds) is in RecipeTables, a
// plain struct handed to a kernel by value; MakeRecipeTables (tensor_recipe.cc) fills it from the
// host's own constants, so the two sides share one source for every table and seed.
#pragma once

#include <cstdint>
#include <iterator>

#include "fuzz/formats/tensor_recipe.h"
#include "reference/host_device.h"

namespace mxdiff::fuzz {

struct RecipeTables {
  uint64_t seed = 0;       // KindSeed(kind, recipe seed)
  uint64_t rare_seed = 0;  // codes: the rare units' own seed
  int rare_log2 = 0;
  uint8_t value_class = 0;
  int narrow_exponent = 0;
  uint8_t narrow_scale = 0;
  uint32_t admitted_count = 0;
  uint8_t admitted[256] = {};  // FoldAdmitted bytes, ascending
  uint8_t flush_edge[4] = {};
  uint16_t interesting_f16[std::size(kInterestingF16)] = {};
  uint8_t interesting_scales[std::size(kInterestingScaleBytes)] = {};
  uint32_t out_of_checkpoint_count = 0;
  uint8_t out_of_checkpoint[std::size(kInterestingScaleBytes)] = {};
};

// The tables of `recipe`'s generator for a tensor of `kind` (host only).
RecipeTables MakeRecipeTables(TensorKind kind, const TensorRecipe& recipe);

namespace recipe_element {

inline constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;
inline constexpr uint32_t kInterestingF16Count = uint32_t(std::size(kInterestingF16));
inline constexpr uint32_t kInterestingScaleCount = uint32_t(std::size(kInterestingScaleBytes));

MXDIFF_HD uint64_t Finalize(uint64_t z) {  // SplitMix64's output function (reference/hash.h)
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
MXDIFF_HD uint64_t Hash(uint64_t mixed_seed, uint64_t unit) { return Finalize(mixed_seed + (unit + 1) * kGamma); }
MXDIFF_HD uint32_t Below(uint64_t bits, uint32_t n) { return uint32_t((uint64_t(uint32_t(bits)) * n) >> 32); }
MXDIFF_HD bool Rare(uint64_t bits, int rare_log2) { return rare_log2 != 0 && (bits >> (64 - rare_log2)) == 0; }

MXDIFF_HD uint16_t NormalF16(uint64_t h) {
  const uint16_t sign = uint16_t(h & 0x8000);
  const uint16_t exponent = uint16_t(9 + Below(h >> 16, 12));
  return uint16_t(sign | (exponent << 10) | (h & 0x3FF));
}

MXDIFF_HD uint16_t Activation(const RecipeTables& t, uint64_t index) {
  const uint64_t h = Hash(t.seed, index);
  if (Rare(h, t.rare_log2)) return t.interesting_f16[Below(h, kInterestingF16Count)];
  const uint16_t sign = uint16_t(h & 0x8000);
  switch (ValueClass(t.value_class)) {
    case ValueClass::kNormal:
      return NormalF16(h);
    case ValueClass::kSubnormal: {
      const uint32_t choice = (h >> 16) & 7;
      if (choice < 6) return uint16_t(sign | ((h & 0x3FF) == 0 ? 1 : (h & 0x3FF)));
      return choice == 6 ? uint16_t(sign | 0x0400 | (h & 0x3FF)) : sign;
    }
    case ValueClass::kSpecials:
      return (h >> 16) & 1 ? t.interesting_f16[Below(h >> 20, kInterestingF16Count)] : NormalF16(h);
    case ValueClass::kNarrow:
      return uint16_t(sign | ((t.narrow_exponent + ((h >> 16) & 1)) << 10) | (h & 0x3FF));
    default:
      return uint16_t(h);
  }
}

// Codes 16 * word .. 16 * word + 15 (nibble i = code i), the rare code applied.
MXDIFF_HD uint64_t CodeWord(const RecipeTables& t, uint64_t word) {
  constexpr uint64_t kBit0 = 0x1111111111111111ull, kSign = 0x8888888888888888ull;
  const uint64_t h = Hash(t.seed, word);
  uint64_t codes = h;
  switch (ValueClass(t.value_class)) {
    case ValueClass::kNormal: {
      uint64_t magnitude = h & ~kSign;
      const uint64_t zero = ~(magnitude | magnitude >> 1 | magnitude >> 2) & kBit0;
      codes = (magnitude | zero * 7) | (h & kSign);
      break;
    }
    case ValueClass::kSubnormal:
      codes = ((h | h >> 1) & kBit0) | (h & kSign);
      break;
    case ValueClass::kSpecials:
      codes = (h & kSign) | (h & kBit0) * 7;
      break;
    case ValueClass::kNarrow:
      codes = (h & (kSign | kBit0)) | (kBit0 << 1);
      break;
    default:
      break;
  }
  if (t.rare_log2 != 0) {
    const uint64_t r = Hash(t.rare_seed, word);
    if (Rare(r, t.rare_log2)) {
      const uint64_t rare_codes = 0xF780;  // nibbles: +0, -0, +6, -6 (codes 0x0, 0x8, 0x7, 0xF)
      const int nibble = int(r & 15);
      const uint64_t code = (rare_codes >> (4 * ((r >> 4) & 3))) & 0xF;
      codes = (codes & ~(uint64_t{0xF} << (4 * nibble))) | (code << (4 * nibble));
    }
  }
  return codes;
}

MXDIFF_HD uint8_t Scale(const RecipeTables& t, uint64_t index) {
  const uint64_t h = Hash(t.seed, index);
  if (Rare(h, t.rare_log2)) return t.out_of_checkpoint[Below(h, t.out_of_checkpoint_count)];
  switch (ValueClass(t.value_class)) {
    case ValueClass::kNormal:
      return t.admitted_count == 0 ? uint8_t(h) : t.admitted[Below(h, t.admitted_count)];
    case ValueClass::kSubnormal:
      return t.flush_edge[h & 3];
    case ValueClass::kSpecials:
      return t.interesting_scales[Below(h, kInterestingScaleCount)];
    case ValueClass::kNarrow:
      return uint8_t(t.narrow_scale + (h & 1));
    case ValueClass::kCheckpoint:
      return uint8_t(kCheckpointScaleFirst + Below(h, kCheckpointScaleCount));
    default:
      return uint8_t(h);
  }
}

}  // namespace recipe_element
}  // namespace mxdiff::fuzz
