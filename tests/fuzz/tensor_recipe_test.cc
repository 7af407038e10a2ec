#include "fuzz/formats/tensor_recipe.h"
#include "fuzz/formats/tensor_recipe_element.h"

#include <algorithm>
#include <set>
#include <vector>

#include "fuzz/mutators/case_mutator.h"
#include "gtest/gtest.h"
#include "reference/admission.h"
#include "tests/reference/test_seed.h"

namespace mxdiff::fuzz {
namespace {

struct Pinned {
  TensorKind kind;
  ValueClass value_class;
  uint16_t values[4];  // elements 0, 1, 17, 1000 of seed 42
};

// The generator's exact output: a change of hash, table or class definition changes these (and
// with it every recipe-described case in corpus/), so it must be deliberate.
constexpr Pinned kPinned[] = {
    {TensorKind::kActivations, ValueClass::kUniform, {0x7204, 0x4055, 0x4925, 0x4899}},
    {TensorKind::kActivations, ValueClass::kNormal, {0x5204, 0x4855, 0x3d25, 0x3c99}},
    {TensorKind::kActivations, ValueClass::kSubnormal, {0x0204, 0x0055, 0x0125, 0x0099}},
    {TensorKind::kActivations, ValueClass::kSpecials, {0x5204, 0x4855, 0x3d25, 0x3c99}},
    {TensorKind::kActivations, ValueClass::kNarrow, {0x3e04, 0x3c55, 0x3d25, 0x3c99}},
    {TensorKind::kCodes, ValueClass::kUniform, {0xb, 0xd, 0x3, 0x3}},
    {TensorKind::kCodes, ValueClass::kNormal, {0xb, 0xd, 0x3, 0x3}},
    {TensorKind::kCodes, ValueClass::kSubnormal, {0x9, 0x9, 0x1, 0x1}},
    {TensorKind::kCodes, ValueClass::kSpecials, {0xf, 0xf, 0x7, 0x7}},
    {TensorKind::kCodes, ValueClass::kNarrow, {0xb, 0xb, 0x3, 0x3}},
    {TensorKind::kScales, ValueClass::kUniform, {0x70, 0xea, 0x9c, 0x04}},
    {TensorKind::kScales, ValueClass::kNormal, {0x75, 0x71, 0x7b, 0x73}},
    {TensorKind::kScales, ValueClass::kSubnormal, {0x6f, 0x71, 0x6f, 0x6f}},
    {TensorKind::kScales, ValueClass::kSpecials, {0x72, 0x00, 0x82, 0x6f}},
    {TensorKind::kScales, ValueClass::kNarrow, {0x74, 0x74, 0x74, 0x74}},
    {TensorKind::kScales, ValueClass::kCheckpoint, {0x75, 0x72, 0x7a, 0x73}},
};

TEST(TensorRecipe, TheSameSeedGivesTheSameBits) {
  for (const Pinned& pinned : kPinned) {
    const TensorRecipe recipe{pinned.value_class, 0, 42, {}};
    const uint64_t indices[] = {0, 1, 17, 1000};
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(GeneratedElement(pinned.kind, recipe, indices[i]), pinned.values[i])
          << TensorKindName(pinned.kind) << " " << ValueClassName(pinned.value_class) << " element " << indices[i];
    }
  }
  EXPECT_EQ(UnitHash(TensorKind::kCodes, 0, 0), 0x46b73e79f0c37c00ull);
  EXPECT_EQ(UnitHash(TensorKind::kScales, 1, 5), 0x8f85a410465d9e4eull);
}

std::vector<uint16_t> Activations(const TensorRecipe& recipe, size_t count, int threads = 1) {
  std::vector<uint16_t> out(count);
  MaterializeActivations(recipe, out, threads);
  return out;
}
std::vector<uint8_t> Codes(const TensorRecipe& recipe, size_t codes, int threads = 1) {
  std::vector<uint8_t> packed(codes / 2);
  MaterializeCodes(recipe, packed, threads);
  std::vector<uint8_t> out(codes);
  for (size_t i = 0; i < codes; ++i) out[i] = i % 2 == 0 ? packed[i / 2] & 0xF : packed[i / 2] >> 4;
  return out;
}
std::vector<uint8_t> Scales(const TensorRecipe& recipe, size_t count, int threads = 1) {
  std::vector<uint8_t> out(count);
  MaterializeScales(recipe, out, threads);
  return out;
}

// Materialization, element access and thread count agree for every class and rare rate.
TEST(TensorRecipe, MaterializationEqualsElementAccessOnAnyThreadCount) {
  CaseRng rng(mxdiff::testing::TestSeed());
  for (int kind = 0; kind < kTensorKindCount; ++kind) {
    for (int value_class = 0; value_class < kValueClassCount; ++value_class) {
      if (!ValueClassAllowed(TensorKind(kind), ValueClass(value_class))) continue;
      for (int rare : {0, 3, 24}) {
        const TensorRecipe recipe{ValueClass(value_class), rare, rng(), {}};
        constexpr size_t kCount = 1 << 17;  // above the per-thread minimum, so 4 threads split it
        std::vector<uint16_t> single, multi;
        switch (TensorKind(kind)) {
          case TensorKind::kActivations: {
            const std::vector<uint16_t> a = Activations(recipe, kCount), b = Activations(recipe, kCount, 4);
            single.assign(a.begin(), a.end());
            multi.assign(b.begin(), b.end());
            break;
          }
          case TensorKind::kCodes: {
            const std::vector<uint8_t> a = Codes(recipe, kCount), b = Codes(recipe, kCount, 4);
            single.assign(a.begin(), a.end());
            multi.assign(b.begin(), b.end());
            break;
          }
          case TensorKind::kScales: {
            const std::vector<uint8_t> a = Scales(recipe, kCount), b = Scales(recipe, kCount, 4);
            single.assign(a.begin(), a.end());
            multi.assign(b.begin(), b.end());
            break;
          }
        }
        ASSERT_EQ(single, multi) << TensorKindName(TensorKind(kind)) << " " << ValueClassName(recipe.value_class);
        for (size_t i = 0; i < kCount; i += 97) {
          ASSERT_EQ(single[i], GeneratedElement(TensorKind(kind), recipe, i))
              << TensorKindName(TensorKind(kind)) << " " << ValueClassName(recipe.value_class) << " rare " << rare
              << " element " << i;
        }
      }
    }
  }
}

int F16Exponent(uint16_t h) { return (h >> 10) & 0x1F; }

TEST(TensorRecipe, ActivationClassesHoldWhatTheyPromise) {
  constexpr size_t kCount = 1 << 16;
  const auto normal = Activations({ValueClass::kNormal, 0, 7, {}}, kCount);
  for (uint16_t h : normal) ASSERT_TRUE(F16Exponent(h) >= 9 && F16Exponent(h) <= 20) << std::hex << h;

  const auto subnormal = Activations({ValueClass::kSubnormal, 0, 7, {}}, kCount);
  size_t subnormals = 0;
  for (uint16_t h : subnormal) {
    ASSERT_LE(F16Exponent(h), 1) << std::hex << h;
    subnormals += F16Exponent(h) == 0 && (h & 0x3FF) != 0;
  }
  EXPECT_GT(subnormals, kCount * 70 / 100);

  const std::set<uint16_t> interesting(std::begin(kInterestingF16), std::end(kInterestingF16));
  const auto specials = Activations({ValueClass::kSpecials, 0, 7, {}}, kCount);
  const size_t special_count =
      std::count_if(specials.begin(), specials.end(), [&](uint16_t h) { return interesting.count(h) != 0; });
  EXPECT_GT(special_count, kCount * 45 / 100);
  EXPECT_LT(special_count, kCount * 55 / 100);

  // Narrow: two binades and both signs, so sums cancel.
  const auto narrow = Activations({ValueClass::kNarrow, 0, 7, {}}, kCount);
  std::set<int> exponents, signs;
  for (uint16_t h : narrow) {
    exponents.insert(F16Exponent(h));
    signs.insert(h >> 15);
  }
  EXPECT_EQ(exponents.size(), 2u);
  EXPECT_EQ(*exponents.rbegin() - *exponents.begin(), 1);
  EXPECT_EQ(signs.size(), 2u);

  const auto uniform = Activations({ValueClass::kUniform, 0, 7, {}}, kCount);
  EXPECT_GT(std::set<uint16_t>(uniform.begin(), uniform.end()).size(), 30000u);

  // rare 2^-4: about one element in 16 from kInterestingF16 among normal values.
  const auto rare = Activations({ValueClass::kNormal, 4, 7, {}}, kCount);
  const size_t rare_count = std::count_if(rare.begin(), rare.end(), [](uint16_t h) {
    return F16Exponent(h) < 9 || F16Exponent(h) > 20;
  });
  EXPECT_GT(rare_count, kCount / 16 / 2);
  EXPECT_LT(rare_count, kCount / 16);
}

TEST(TensorRecipe, CodeClassesHoldWhatTheyPromise) {
  constexpr size_t kCount = 1 << 16;
  const std::pair<ValueClass, std::set<uint8_t>> expected[] = {
      {ValueClass::kNormal, {1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15}},
      {ValueClass::kSubnormal, {0, 1, 8, 9}},
      {ValueClass::kSpecials, {0, 7, 8, 15}},
      {ValueClass::kNarrow, {2, 3, 10, 11}},
  };
  for (const auto& [value_class, codes] : expected) {
    const auto values = Codes({value_class, 0, 9, {}}, kCount);
    EXPECT_EQ(std::set<uint8_t>(values.begin(), values.end()), codes) << ValueClassName(value_class);
  }
  const auto uniform = Codes({ValueClass::kUniform, 0, 9, {}}, kCount);
  EXPECT_EQ(std::set<uint8_t>(uniform.begin(), uniform.end()).size(), 16u);
  // rare 2^-2 on narrow codes: about one unit of 16 codes in 4 holds a +-0 or +-6.
  const auto rare = Codes({ValueClass::kNarrow, 2, 9, {}}, kCount);
  const size_t rare_count = std::count_if(rare.begin(), rare.end(), [](uint8_t c) { return (c & 7) == 0 || (c & 7) == 7; });
  EXPECT_GT(rare_count, kCount / 16 / 4 * 8 / 10);
  EXPECT_LT(rare_count, kCount / 16 / 4 * 12 / 10);
}

TEST(TensorRecipe, ScaleClassesHoldWhatTheyPromise) {
  constexpr size_t kCount = 1 << 20;
  const auto checkpoint = Scales({ValueClass::kCheckpoint, 0, 11, {}}, kCount);
  EXPECT_EQ(*std::min_element(checkpoint.begin(), checkpoint.end()), kCheckpointScaleFirst);
  EXPECT_EQ(*std::max_element(checkpoint.begin(), checkpoint.end()), kCheckpointScaleLast);
  EXPECT_EQ(std::set<uint8_t>(checkpoint.begin(), checkpoint.end()).size(), 13u);

  // With rare 2^-8: about one byte in 256 outside 114..126, each from kInterestingScaleBytes.
  const std::set<uint8_t> interesting(std::begin(kInterestingScaleBytes), std::end(kInterestingScaleBytes));
  const auto rare = Scales({ValueClass::kCheckpoint, 8, 11, {}}, kCount);
  size_t outside = 0;
  std::set<uint8_t> outside_values;
  for (uint8_t raw : rare) {
    if (raw >= kCheckpointScaleFirst && raw <= kCheckpointScaleLast) continue;
    ++outside;
    outside_values.insert(raw);
    ASSERT_EQ(interesting.count(raw), 1u) << int(raw);
  }
  EXPECT_GT(outside, kCount / 256 * 9 / 10);
  EXPECT_LT(outside, kCount / 256 * 11 / 10);
  EXPECT_TRUE(outside_values.count(112) && outside_values.count(129) && outside_values.count(255));

  const auto normal = Scales({ValueClass::kNormal, 0, 11, {}}, kCount);
  std::set<uint8_t> admitted;
  for (int raw = 0; raw < 256; ++raw) {
    if (FoldAdmitted(uint8_t(raw))) admitted.insert(uint8_t(raw));
  }
  EXPECT_EQ(std::set<uint8_t>(normal.begin(), normal.end()), admitted);

  const auto subnormal = Scales({ValueClass::kSubnormal, 0, 11, {}}, kCount);
  const uint8_t lowest = *admitted.begin();
  EXPECT_EQ(std::set<uint8_t>(subnormal.begin(), subnormal.end()),
            (std::set<uint8_t>{uint8_t(lowest - 2), uint8_t(lowest - 1), lowest, uint8_t(lowest + 1)}));

  for (uint64_t seed : {1, 2, 3, 4, 5}) {
    const auto narrow = Scales({ValueClass::kNarrow, 0, seed, {}}, 4096);
    const std::set<uint8_t> values(narrow.begin(), narrow.end());
    ASSERT_EQ(values.size(), 2u);
    EXPECT_EQ(*values.rbegin() - *values.begin(), 1);
    EXPECT_GE(*values.begin(), kCheckpointScaleFirst);
    EXPECT_LE(*values.rbegin(), kCheckpointScaleLast);
  }
  const auto uniform = Scales({ValueClass::kUniform, 0, 11, {}}, kCount);
  EXPECT_EQ(std::set<uint8_t>(uniform.begin(), uniform.end()).size(), 256u);
}

// The narrow class's scales are a pair b, b + 1 of adjacent checkpoint bytes, b from the seed
// (tensor_recipe.h). Over many seeds b takes all of 114..125, so the pairs reach 126 as b + 1,
// and no pair leaves 114..126: b = 126 would put 127 into the class (a "+ 1" on NarrowScale's
// draw, which its siblings' single-byte draws have, is wrong here).
TEST(TensorRecipe, NarrowPairsCoverTheCheckpointAndStayInIt) {
  std::set<uint8_t> lower, all;
  for (uint64_t seed = 0; seed < 400; ++seed) {
    const auto narrow = Scales({ValueClass::kNarrow, 0, seed, {}}, 512);
    const std::set<uint8_t> values(narrow.begin(), narrow.end());
    ASSERT_EQ(values.size(), 2u) << "seed " << seed;
    ASSERT_EQ(*values.rbegin() - *values.begin(), 1) << "seed " << seed;
    for (uint8_t raw : values) EXPECT_TRUE(IsCheckpointScale(raw)) << "seed " << seed << ": raw " << int(raw);
    lower.insert(*values.begin());
    all.insert(values.begin(), values.end());
  }
  EXPECT_EQ(lower.size(), size_t(kCheckpointScaleCount - 1));
  EXPECT_EQ(all.size(), size_t(kCheckpointScaleCount));
  EXPECT_EQ(*all.begin(), kCheckpointScaleFirst);
  EXPECT_EQ(*all.rbegin(), kCheckpointScaleLast);
}

TEST(TensorRecipe, OverridesAreAppliedInOrderOverTheGenerator) {
  TensorRecipe recipe{ValueClass::kCheckpoint, 0, 5, {{0, 255}, {63, 0}, {17, 129}, {17, 112}}};
  const auto scales = Scales(recipe, 64);
  EXPECT_EQ(scales[0], 255);
  EXPECT_EQ(scales[63], 0);
  EXPECT_EQ(scales[17], 112);  // the later override at the same index wins
  for (size_t i = 1; i < 63; ++i) {
    if (i == 17) continue;
    EXPECT_EQ(scales[i], GeneratedElement(TensorKind::kScales, recipe, i)) << i;
  }
  // Codes: the index counts codes; an odd one is the high nibble.
  TensorRecipe codes{ValueClass::kNarrow, 0, 5, {{0, 0x7}, {1, 0xF}, {127, 0x8}}};
  std::vector<uint8_t> packed(64);
  MaterializeCodes(codes, packed, 1);
  EXPECT_EQ(packed[0], 0xF7);
  EXPECT_EQ(packed[63] >> 4, 0x8);
  EXPECT_EQ(packed[63] & 0xF, GeneratedElement(TensorKind::kCodes, codes, 126));
  TensorRecipe activations{ValueClass::kNormal, 0, 5, {{3, 0x7C00}}};
  EXPECT_EQ(Activations(activations, 8)[3], 0x7C00);
}

// A group's slice of a layer's codes is that part of the whole layer's bytes: every class, rare
// codes or not, overrides before, in (at both ends, twice at one index) and after the slice.
TEST(TensorRecipe, ACodeSliceIsThatPartOfTheWholeTensor) {
  const uint64_t seed = mxdiff::testing::TestSeed();
  constexpr size_t kGroupCodes = 64 * 96;  // N 64 x K 96
  for (ValueClass value_class : {ValueClass::kUniform, ValueClass::kNormal, ValueClass::kSpecials, ValueClass::kNarrow}) {
    for (int rare_log2 : {0, 3}) {
      TensorRecipe recipe{value_class, rare_log2, seed + uint64_t(rare_log2), {}};
      const uint64_t first = 2 * kGroupCodes, last = first + kGroupCodes - 1;
      recipe.overrides = {{5, 1}, {uint32_t(first), 0xF}, {uint32_t(first + 7), 0x3}, {uint32_t(first + 7), 0x9},
                          {uint32_t(last), 0x8}, {uint32_t(last + 1), 0x2}};
      std::vector<uint8_t> whole(4 * kGroupCodes / 2), slice(kGroupCodes / 2);
      MaterializeCodes(recipe, whole, 1);
      MaterializeCodeSlice(recipe, first, slice, 1);
      EXPECT_TRUE(std::equal(slice.begin(), slice.end(), whole.begin() + long(first / 2)))
          << ValueClassName(value_class) << " rare 2^-" << rare_log2 << " (MXDIFF_SEED=" << seed << ")";
      EXPECT_EQ(slice.front() & 0xF, 0xF);
      EXPECT_EQ(slice[3] >> 4, 0x9) << "the later override at one index wins";
      EXPECT_EQ(slice.back() >> 4, 0x8);
    }
  }
}

TEST(TensorRecipe, SeedsAndKindsAreIndependent) {
  // Equal seeds of two tensors, or neighbouring seeds, must not repeat each other's bits.
  EXPECT_NE(UnitHash(TensorKind::kCodes, 1, 0), UnitHash(TensorKind::kScales, 1, 0));
  EXPECT_NE(UnitHash(TensorKind::kCodes, 1, 1), UnitHash(TensorKind::kCodes, 2, 0));
  const auto a = Scales({ValueClass::kUniform, 0, 1, {}}, 4096), b = Scales({ValueClass::kUniform, 0, 2, {}}, 4096);
  size_t equal = 0;
  for (size_t i = 0; i < a.size(); ++i) equal += a[i] == b[i];
  EXPECT_LT(equal, 64u);  // about 16 by chance
}

TEST(TensorRecipe, ClassNamesAndAllowedKinds) {
  EXPECT_STREQ(ValueClassName(ValueClass::kCheckpoint), "checkpoint");
  EXPECT_STREQ(ValueClassName(ValueClass::kSubnormal), "subnormal");
  EXPECT_TRUE(ValueClassAllowed(TensorKind::kScales, ValueClass::kCheckpoint));
  EXPECT_FALSE(ValueClassAllowed(TensorKind::kActivations, ValueClass::kCheckpoint));
  EXPECT_FALSE(ValueClassAllowed(TensorKind::kCodes, ValueClass::kCheckpoint));
  EXPECT_FALSE(ValueClassAllowed(TensorKind::kScales, ValueClass(kValueClassCount)));
  EXPECT_EQ(DescribeRecipe({ValueClass::kCheckpoint, 16, 0x2a, {{1, 2}}}), "checkpoint seed 0x2a rare 2^-16, 1 overrides");
}

}  // namespace
}  // namespace mxdiff::fuzz

// The host/device element functions (tensor_recipe_element.h: what the device materialization
// runs) equal the host generator, element by element, for every kind, class and a spread of rare
// rates (rare 1..3 make rare values frequent enough to be hit). The GPU side is compared with the
// host materialization bit for bit in tests/fuzz/device_materialize_test.cc.
namespace mxdiff::fuzz {
namespace {

TEST(TensorRecipeElement, HostDeviceFunctionsEqualTheHostGenerator) {
  SplitMix64 seeds(mxdiff::testing::TestSeed());
  for (TensorKind kind : {TensorKind::kActivations, TensorKind::kCodes, TensorKind::kScales}) {
    for (int c = 0; c < kValueClassCount; ++c) {
      if (!ValueClassAllowed(kind, ValueClass(c))) continue;
      for (int rare : {0, 1, 2, 3, 16}) {
        TensorRecipe recipe{ValueClass(c), rare, seeds.Next(), {}};
        const RecipeTables tables = MakeRecipeTables(kind, recipe);
        for (uint64_t index = 0; index < 4096; ++index) {
          const uint64_t i = index < 2048 ? index : seeds.Next() % (uint64_t(1) << 30);
          uint16_t element = 0;
          if (kind == TensorKind::kActivations) element = recipe_element::Activation(tables, i);
          if (kind == TensorKind::kCodes) element = uint16_t((recipe_element::CodeWord(tables, i / 16) >> (4 * (i % 16))) & 0xF);
          if (kind == TensorKind::kScales) element = recipe_element::Scale(tables, i);
          ASSERT_EQ(element, GeneratedElement(kind, recipe, i))
              << TensorKindName(kind) << " " << DescribeRecipe(recipe) << " element " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace mxdiff::fuzz
