// The structure-aware mutator: decodes a case (its description only: recipes are not
// materialized), changes fields the way bugs hide, and encodes it again, so nearly every
// mutation is a valid case. libFuzzer's byte mutations alone would almost always break the
// strict format. What it changes:
//  - shapes: grow and shrink N, K, groups and rows; jumps to the real decode shapes (W13 and W2
//    at TP4 and TP8, top-6 routing over 6 or 256 experts, a few rows per expert, a shared
//    expert, 512 rows) where the profile allows them;
//  - elements at the places defects live (the last k block of a split, the last column of a
//    partial N tile, the first row after an empty expert, 32-element block boundaries): written
//    into byte-by-byte payloads, or added to a recipe as overrides; overrides moved and removed;
//  - generators: value class, seed and rare rate switched, a tensor turned from bytes into a
//    recipe or (when small) back;
//  - scale bytes toward the admission edges, fp16 specials, tactics at their limits, request,
//    policy, model, registry holes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <span>
#include <string_view>
#include <vector>

#include "fuzz/formats/case_format.h"
#include "reference/decode_shapes.h"
#include "reference/hash.h"

namespace mxdiff::fuzz {

// A small, fast generator (SplitMix64; a UniformRandomBitGenerator): the mutator seeds one per
// mutation, and std::mt19937_64's seeding alone cost more than the mutation.
using CaseRng = SplitMix64;

// One value of `table`, each slot equally likely: the draw follows the table's own size, so a value
// added to a table is drawn without touching its picks (libFuzzer's MutationDispatcher draws from
// its mutators' vector the same way).
template <typename T, size_t N>
const T& Pick(CaseRng& rng, const T (&table)[N]) {
  return table[rng() % std::size(table)];
}
template <typename T, size_t N>
const T& Pick(CaseRng& rng, std::span<const T, N> table) {
  return table[rng() % table.size()];
}

// Size limits of a case, within the format's bounds.
struct ShapeLimits {
  int max_groups = 4;
  int max_rows_per_group = 4;
  int max_rows = 8;  // all groups together
  int max_n = 16;
  int max_k = 128;
  int64_t max_weight_elements = kMaxWeightElements;  // groups x N x K
  int64_t max_products = int64_t{1} << 40;           // rows x N x K: the reference's work
};

// Per-target limits so each target's inputs stay fast. Nearly every case lives in `small`; with
// real_shapes_one_in > 0 one mutation in that many jumps to a real decode shape, and such a
// case may then grow or shrink anywhere within `large` (an input beyond `small` is pulled back
// into it in one mutation of shrink_large_one_in).
struct MutationProfile {
  ShapeLimits small;
  ShapeLimits large = small;  // the most any case of this profile reaches
  int real_shapes_one_in = 0;
  int shrink_large_one_in = 2;
  // A tensor larger than this is kept as a recipe (the target's max_len bounds the whole case).
  size_t max_explicit_bytes = 1024;
};

using mxdiff::DecodeShape;
using mxdiff::kDecodeShapes;
using mxdiff::kRoutedExperts;
inline constexpr int kTopK = mxdiff::kDecodeTopK;

inline constexpr int kInterestingCtaK[] = {4, 8, 12, 16, 20, 24, 28, 32, 36, 48, 64, 96, 128, 192, 256};

// Where an element was placed (each coordinate independently at a defect site or anywhere);
// tests/fuzz/case_mutator_test.cc classifies placed overrides the same way.
struct ElementSite {
  int group = 0;
  int row = -1;  // global activation row; -1 where the case has no rows
  int column = 0;
  int k = 0;
};
ElementSite PickSite(const FuzzCase& fuzz_case, CaseRng& rng);

// A tactic of the format's whole range: any interesting tile (fuzz/mutators/fuzz_rules.h), cta_k, splits,
// swizzle (past the kernels' limit too). fuzz_layer's tactics draw from it too.
Tactic RandomTactic(CaseRng& rng);

// The names of the mutations MutateCase draws from (fuzz/mutators/mutation_sequence.h records them), each
// once; MutateEncodedCase adds random-case, real-shape, activation-bytes and fit-max-len.
std::vector<std::string_view> CaseMutationNames();
// The element index of a site in a tensor (fuzz/formats/tensor_recipe.h), or -1 where the tensor has
// no such element (activations of a case without rows).
int64_t SiteIndex(const FuzzCase& fuzz_case, TensorKind kind, const ElementSite& site);

// A random valid case within `profile.small`, materialized.
FuzzCase RandomCase(CaseRng& rng, const MutationProfile& profile);

// Applies one to three structural mutations; the result is always valid within
// `profile.large` (within `profile.small` when the profile has no real shapes). Recipe
// tensors are left unmaterialized (their vectors empty): MaterializeCase before running it.
void MutateCase(FuzzCase& fuzz_case, CaseRng& rng, const MutationProfile& profile);

// libFuzzer's LLVMFuzzerCustomMutator body: an undecodable input is replaced by a random
// case; `byte_mutator` (LLVMFuzzerMutate in fuzzing builds, may be empty) sometimes mutates
// a byte-by-byte activation payload in place. Returns the new size, never more than max_size
// (0 if no case that small exists). Never materializes a recipe.
using ByteMutator = std::function<size_t(uint8_t* data, size_t size, size_t max_size)>;
size_t MutateEncodedCase(uint8_t* data, size_t size, size_t max_size, unsigned seed,
                         const MutationProfile& profile, const ByteMutator& byte_mutator);

}  // namespace mxdiff::fuzz
