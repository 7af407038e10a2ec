// Tensor recipes of the case format v2 (fuzz/README.md: the case format): a payload tensor
// described by a generator (value class + seed + rare rate) plus a bounded list of explicit
// overrides, instead of byte by byte, so a case of real decode size (12.6 MB of W13 weights
// for 6 experts) is a few hundred bytes on disk.
//
// The generator is counter-based: element i's random bits are a SplitMix64 finalizer of
// (seed, i) alone, never of a running state, so materialization is independent of order (any
// slice can be computed alone, on any thread) and the same recipe gives the same bits on every
// machine and compiler (integer arithmetic only; tests/fuzz/tensor_recipe_test.cc pins values).
//
// Value classes (what one element is; "unit" is what one 64-bit hash feeds):
//
// | class      | activations (fp16 bits, unit 1)    | codes (e2m1 nibbles, unit 16 codes) | scales (UE8M0, unit 1)          |
// | ---------- | ---------------------------------- | ----------------------------------- | ------------------------------- |
// | uniform    | any 16 bits                        | any code                            | any byte                        |
// | normal     | random sign, 2^-6 <= |x| < 2^6     | nonzero codes (+-0.5 .. +-6)        | FoldAdmitted bytes (derived)    |
// | subnormal  | 3/4 fp16 subnormals, 1/8 smallest  | +-0.5 (the e2m1 subnormal), +-0     | the flush edge: lowest admitted |
// |            | normal binade, 1/8 +-0             |                                     | byte - 2 .. + 1                 |
// | specials   | half kInterestingF16, half normal  | +-0 and +-6                         | kInterestingScaleBytes          |
// | narrow     | one binade pair [2^e, 2^(e+2)),    | +-1 and +-1.5 (one binade),         | two adjacent checkpoint bytes   |
// |            | e from the seed, random signs:     | random signs                        | b, b + 1 (b from the seed)      |
// |            | sums cancel                        |                                     |                                 |
// | checkpoint | (scales only)                      | (scales only)                       | raw 114..126, as the V4-Flash   |
// |            |                                    |                                     | checkpoint (docs/numerics.md)   |
//
// rare_log2 r (0 = off): one unit in 2^r takes a rare value instead: an fp16 from
// kInterestingF16; one code of the 16 replaced by +-0 or +-6; a scale byte outside the
// checkpoint's 114..126 (from kInterestingScaleBytes). So "checkpoint" with r = 16 is the
// checkpoint's distribution with rare out-of-range bytes, r = 0 the checkpoint exactly.
//
// Overrides (index, value) are applied after the generator, in list order (a later one at the
// same index wins). Indices count elements: activations row * K + k; codes
// (group * N + n) * K + k (one code, not one packed byte); scales (group * N + n) * K/32 + k/32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "reference/checkpoint_scales.h"
#include "reference/fp16.h"

namespace mxdiff::fuzz {

enum class TensorKind : uint8_t { kActivations = 0, kCodes = 1, kScales = 2 };
inline constexpr int kTensorKindCount = 3;
const char* TensorKindName(TensorKind kind);  // "activations", "codes", "scales"

enum class ValueClass : uint8_t {
  kUniform = 0,
  kNormal = 1,
  kSubnormal = 2,
  kSpecials = 3,
  kNarrow = 4,
  kCheckpoint = 5,  // scales only
};
inline constexpr int kValueClassCount = 6;
const char* ValueClassName(ValueClass value_class);  // "uniform", ..., "checkpoint"
bool ValueClassAllowed(TensorKind kind, ValueClass value_class);

// The V4-Flash checkpoint's scale bytes, kCheckpointScaleFirst..Last (114..126), live in
// reference/checkpoint_scales.h: the tests below fuzz/ ask them too.

inline constexpr uint8_t kInterestingScaleBytes[] = {0,   1,   111, 112, 113, 114, 115, 120, 126, 127,
                                                     128, 129, 130, 141, 142, 143, 200, 254, 255};
// The recipes' fp16 specials: the first 19 of reference/fp16.h's one table, in its order (a
// recipe's element indexes them, so the corpus keeps its bits while that table only appends).
inline constexpr std::span<const uint16_t, 19> kInterestingF16(kF16SpecialValues, 19);
static_assert(std::size(kF16SpecialValues) >= kInterestingF16.size());

inline constexpr int kMaxRareLog2 = 30;

struct TensorOverride {
  uint32_t index = 0;
  uint16_t value = 0;  // fp16 bits, a code 0..15, or a scale byte

  friend bool operator==(const TensorOverride&, const TensorOverride&) = default;
};

struct TensorRecipe {
  ValueClass value_class = ValueClass::kUniform;
  int rare_log2 = 0;  // 0: no rare values
  uint64_t seed = 0;
  std::vector<TensorOverride> overrides;

  friend bool operator==(const TensorRecipe&, const TensorRecipe&) = default;
};

// The largest value an element of the kind holds (0xFFFF, 15, 255).
int MaxElementValue(TensorKind kind);

// The generator's random bits of unit `unit` (the SplitMix64 finalizer of seed and unit, after
// the seed is mixed with the kind so equal seeds of different tensors are unrelated).
uint64_t UnitHash(TensorKind kind, uint64_t seed, uint64_t unit);

// Fill a whole tensor from its recipe, overrides included. Sizes: activations rows * K fp16,
// codes groups * N * K / 2 packed bytes (a multiple of 8: K is a multiple of 32), scales
// groups * N * K / 32 bytes. `threads` > 1 splits large tensors over that many threads (the
// bits do not depend on it); 0 picks from the hardware for tensors of a megabyte or more.
void MaterializeActivations(const TensorRecipe& recipe, std::span<uint16_t> out, int threads = 0);
void MaterializeCodes(const TensorRecipe& recipe, std::span<uint8_t> packed, int threads = 0);
void MaterializeScales(const TensorRecipe& recipe, std::span<uint8_t> out, int threads = 0);
// The packed codes of elements first_code .. first_code + 2 * packed.size() (first_code a multiple
// of 16): that slice of MaterializeCodes' bytes, overrides included (one group's weights of a
// 256-expert layer without the other 255).
void MaterializeCodeSlice(const TensorRecipe& recipe, uint64_t first_code, std::span<uint8_t> packed, int threads = 0);

// Element `index` of the generator alone (no overrides): a code 0..15 for kCodes. For tests and
// for readers that need a few elements without materializing the tensor.
uint16_t GeneratedElement(TensorKind kind, const TensorRecipe& recipe, uint64_t index);

// Whether two recipes generate the same tensor before their overrides (class, rare rate, seed).
bool SameGenerator(const TensorRecipe& a, const TensorRecipe& b);

// `tensor` (stored as in Materialize*: fp16 little-endian, packed codes, scale bytes) holds the
// materialization of a recipe with `recipe`'s generator but other overrides, at indices `stale`;
// afterwards it holds `recipe`'s. Costs the overrides, not the tensor: a fuzz loop that moves
// overrides over 12.6 MB of W13 codes regenerates a few elements per execution.
void RematerializeOverrides(TensorKind kind, const TensorRecipe& recipe, std::span<const uint32_t> stale,
                            std::span<uint8_t> tensor);

// "checkpoint seed 0x2a rare 2^-16, 2 overrides" (the overrides themselves are listed by
// DescribeCase, which knows the shape).
std::string DescribeRecipe(const TensorRecipe& recipe);

}  // namespace mxdiff::fuzz
