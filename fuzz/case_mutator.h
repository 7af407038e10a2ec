// The structure-aware mutator: decodes a case, changes fields the way bugs hide (scale bytes
// toward the admission edges, fp16 specials, shapes and tactics at their limits, registry
// holes), and encodes it again, so nearly every mutation is a valid case. libFuzzer's byte
// mutations alone would almost always break the strict format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

#include "fuzz/case_format.h"

namespace mxdiff::fuzz {

// A small, fast generator (SplitMix64; a UniformRandomBitGenerator): the mutator seeds one per
// mutation, and std::mt19937_64's seeding alone cost more than the mutation.
class CaseRng {
 public:
  using result_type = uint64_t;
  explicit CaseRng(uint64_t seed) : state_(seed) {}
  static constexpr uint64_t min() { return 0; }
  static constexpr uint64_t max() { return ~uint64_t{0}; }
  uint64_t operator()() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

 private:
  uint64_t state_;
};

// Per-target size limits (within the format's bounds) so each target's inputs stay fast.
struct MutationProfile {
  int max_groups = 4;
  int max_rows_per_group = 4;
  int max_n = 16;
  int max_k = 128;
};

inline constexpr uint8_t kInterestingScaleBytes[] = {0,   1,   111, 112, 113, 114, 115, 120, 126, 127,
                                                     128, 129, 130, 141, 142, 143, 200, 254, 255};
inline constexpr uint16_t kInterestingF16[] = {
    0x0000, 0x8000,  // +-0
    0x0001, 0x8001, 0x03FF, 0x0200,  // subnormals
    0x0400, 0x3C00, 0xBC00, 0x3800, 0x4000, 0x3555,  // smallest normal, +-1, 0.5, 2, ~1/3
    0x7BFF, 0xFBFF,  // +-65504
    0x7C00, 0xFC00,  // +-Inf
    0x7E00, 0x7C01, 0xFFFF,  // NaNs
};
inline constexpr int kInterestingCtaK[] = {4, 8, 12, 16, 20, 24, 28, 32, 36, 48, 64, 96, 128, 192, 256};

// A random valid case within `profile`.
FuzzCase RandomCase(CaseRng& rng, const MutationProfile& profile);

// Applies one to three structural mutations; the result is always valid within `profile`.
void MutateCase(FuzzCase& fuzz_case, CaseRng& rng, const MutationProfile& profile);

// libFuzzer's LLVMFuzzerCustomMutator body: an undecodable input is replaced by a random
// case; `byte_mutator` (LLVMFuzzerMutate in fuzzing builds, may be empty) sometimes mutates
// the activation payload in place. Returns the new size, never more than max_size (0 if no
// case that small exists).
using ByteMutator = std::function<size_t(uint8_t* data, size_t size, size_t max_size)>;
size_t MutateEncodedCase(uint8_t* data, size_t size, size_t max_size, unsigned seed,
                         const MutationProfile& profile, const ByteMutator& byte_mutator);

}  // namespace mxdiff::fuzz
