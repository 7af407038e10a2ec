#include "fuzz/formats/case_format.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "fuzz/mutators/case_mutator.h"
#include "fuzz/driver/target_driver.h"
#include "gtest/gtest.h"
#include "tests/reference/test_seed.h"

namespace mxdiff::fuzz {
namespace {

FuzzCase SmallCase() {
  FuzzCase c;
  const int rows[] = {1, 0, 2};
  ResizeCase(c, 3, 2, 64, rows);
  for (size_t i = 0; i < c.activations.size(); ++i) c.activations[i] = uint16_t(0x3C00 + i);
  for (size_t i = 0; i < c.packed_codes.size(); ++i) c.packed_codes[i] = uint8_t(i * 37);
  for (size_t i = 0; i < c.scale_bytes.size(); ++i) c.scale_bytes[i] = uint8_t(110 + i);
  c.tactic = Tactic{8, 128, 64, 3, 2};
  c.request = TransformRequest::kFolded;
  c.policy = FallbackPolicy::kFailClosed;
  c.model = StepModel::kV100;
  c.registry = {{c.tactic, Transform::kOrdinary}, {Tactic{16, 128, 32, 1, 0}, Transform::kFolded}};
  return c;
}

// Every tensor a recipe: W13 at TP4 for 2 of 4 experts (one empty expert first).
FuzzCase RecipeCase() {
  FuzzCase c;
  const int rows[] = {0, 1, 0, 2};
  ResizeCase(c, 4, 1024, 4096, rows);
  c.tactic = Tactic{8, 128, 64, 16, 0};
  c.registry = {{c.tactic, Transform::kOrdinary}};
  c.recipe(TensorKind::kActivations) = TensorRecipe{ValueClass::kNarrow, 4, 0x1234, {{4096, 0x7C00}}};
  c.recipe(TensorKind::kCodes) = TensorRecipe{ValueClass::kUniform, 0, 0xC0DE, {{(1 * 1024 + 1023) * 4096 + 4095, 0x7}}};
  c.recipe(TensorKind::kScales) =
      TensorRecipe{ValueClass::kCheckpoint, 16, 0x5CA1E, {{(1 * 1024 + 1023) * 128 + 127, 129}, {0, 112}}};
  MaterializeCase(c);
  return c;
}

// group_of_row skips empty groups: rows 0..2 in group 1, rows 3..6 in group 3 (groups 0, 2 and 4 empty).
TEST(CaseFormat, GroupOfRowSkipsEmptyGroups) {
  FuzzCase c;
  c.row_offsets = {0, 0, 3, 3, 7, 7};
  const int expected[] = {1, 1, 1, 3, 3, 3, 3};
  for (int row = 0; row < c.rows(); ++row) EXPECT_EQ(c.group_of_row(row), expected[row]) << "row " << row;
}

TEST(CaseFormat, RoundTripsAFixedCaseByteForByte) {
  const FuzzCase c = SmallCase();
  absl::StatusOr<std::vector<uint8_t>> bytes = EncodeCase(c);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(bytes->size(), EncodedSize(c));
  // The documented header (fuzz/README.md): magic, version 2, groups u16, n, k.
  const std::vector<uint8_t> head(bytes->begin(), bytes->begin() + 11);
  EXPECT_EQ(head, (std::vector<uint8_t>{'M', 'X', 'D', 'F', 2, 3, 0, 2, 0, 64, 0}));
  absl::StatusOr<FuzzCase> decoded = DecodeCase(*bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, c);
  EXPECT_EQ(*EncodeCase(*decoded), *bytes);
}

TEST(CaseFormat, RoundTripsARecipeCaseInAFewHundredBytes) {
  const FuzzCase c = RecipeCase();
  ASSERT_EQ(c.packed_codes.size(), size_t(4) * 1024 * 4096 / 2);
  absl::StatusOr<std::vector<uint8_t>> bytes = EncodeCase(c);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(bytes->size(), EncodedSize(c));
  // header 24 + registry 10 + rows 4 + activations (12 + 6) + codes (12 + 6) + scales (12 + 12)
  EXPECT_EQ(bytes->size(), 24u + 10 + 4 + 18 + 18 + 24);
  absl::StatusOr<FuzzCase> decoded = DecodeCase(*bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, c);
  EXPECT_EQ(*EncodeCase(*decoded), *bytes);
  // The overrides are where they were put.
  EXPECT_EQ(decoded->activations[4096], 0x7C00);
  EXPECT_EQ(decoded->packed_codes[((1 * 1024 + 1023) * 4096 + 4095) / 2] >> 4, 0x7);
  EXPECT_EQ(decoded->scale_bytes[(1 * 1024 + 1023) * 128 + 127], 129);
  EXPECT_EQ(decoded->scale_bytes[0], 112);

  // Without materialization: the same description, recipe vectors empty.
  FuzzCase description;
  ASSERT_TRUE(DecodeCaseInto(*bytes, description, Materialize::kNo).ok());
  EXPECT_TRUE(description.activations.empty() && description.packed_codes.empty() && description.scale_bytes.empty());
  EXPECT_EQ(description.recipes, c.recipes);
  EXPECT_TRUE(ValidateCase(description).ok());
  EXPECT_EQ(*EncodeCase(description), *bytes);
  // Into a case holding a larger one: the buffers are reused and the result is the same.
  FuzzCase reused = RecipeCase();
  reused.recipe(TensorKind::kCodes)->seed = 1;
  MaterializeCase(reused);
  ASSERT_TRUE(DecodeCaseInto(*bytes, reused).ok());
  EXPECT_EQ(reused, c);
}

TEST(CaseFormat, MixedExplicitAndRecipeTensorsRoundTrip) {
  FuzzCase c = SmallCase();
  c.recipe(TensorKind::kCodes) = TensorRecipe{ValueClass::kSpecials, 2, 77, {{5, 3}}};
  MaterializeCase(c);
  const std::vector<uint8_t> bytes = *EncodeCase(c);
  EXPECT_EQ(bytes.size(), EncodedSize(c));
  EXPECT_EQ(*DecodeCase(bytes), c);
}

TEST(CaseFormat, RoundTripsRandomAndMutatedCases) {
  CaseRng rng(mxdiff::testing::TestSeed());
  const ShapeLimits wide{16, 16, 64, 64, 512, kMaxWeightElements, int64_t{1} << 40};
  const MutationProfile profile{wide, wide, 0, 2, 4096};
  for (int i = 0; i < 300; ++i) {
    const FuzzCase c = RandomCase(rng, profile);
    absl::StatusOr<std::vector<uint8_t>> bytes = EncodeCase(c);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    absl::StatusOr<FuzzCase> decoded = DecodeCase(*bytes);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    ASSERT_EQ(*decoded, c) << "case " << i;
  }
  // fuzz_gemm's mutations (real shapes included), compared as descriptions.
  FuzzCase c = RandomCase(rng, kGemmProfile);
  for (int i = 0; i < 2000; ++i) {
    MutateCase(c, rng, kGemmProfile);
    absl::StatusOr<std::vector<uint8_t>> bytes = EncodeCase(c);
    ASSERT_TRUE(bytes.ok()) << "mutation " << i << ": " << bytes.status();
    ASSERT_EQ(bytes->size(), EncodedSize(c));
    FuzzCase decoded;
    ASSERT_TRUE(DecodeCaseInto(*bytes, decoded, Materialize::kNo).ok());
    ASSERT_EQ(decoded, c) << "mutation " << i;
  }
}

// The fuzz loop decodes every input into one case with a memo of what it generated last; the
// result must be the bytes a fresh decode gives, whatever came before (other generators, other
// shapes, explicit payloads, inputs that fail half-way through decoding).
// With the weights left to the device now and then (Materialize::kAllButWeights), too.
TEST(CaseFormat, DecodingWithAMemoGivesTheBytesOfAFreshDecode) {
  const uint64_t seed = mxdiff::testing::TestSeed();
  CaseRng rng(seed);
  // Small shapes, but weights large enough to be recipes half of the time.
  const ShapeLimits limits{4, 4, 8, 64, 256, kMaxWeightElements, int64_t{1} << 40};
  const MutationProfile profile{limits, limits, 0, 2, 512};
  FuzzCase c = RandomCase(rng, profile);
  FuzzCase reused;
  MaterializationMemo memo;
  int incremental = 0;
  for (int i = 0; i < 3000; ++i) {
    const FuzzCase before = c;
    MutateCase(c, rng, profile);
    if (rng() % 4 == 0) {  // move only the overrides, as most fuzzing steps do
      c = before;
      for (int kind = 0; kind < kTensorKindCount; ++kind) {
        std::optional<TensorRecipe>& recipe = c.recipes[kind];
        if (!recipe || c.element_count(TensorKind(kind)) == 0) continue;
        if (!recipe->overrides.empty()) recipe->overrides.pop_back();
        const uint32_t index = uint32_t(rng() % c.element_count(TensorKind(kind)));
        if (rng() % 2) recipe->overrides.push_back({index, uint16_t(rng() % 16)});
      }
    }
    absl::StatusOr<std::vector<uint8_t>> bytes = EncodeCase(c);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    if (rng() % 8 == 0) {  // a truncated input the reader gives up on part-way
      std::vector<uint8_t> truncated(bytes->begin(), bytes->begin() + long(rng() % bytes->size()));
      ASSERT_FALSE(DecodeCaseInto(truncated, reused, Materialize::kYes, &memo).ok());
    }
    for (int kind = 0; kind < kTensorKindCount; ++kind) {
      const MaterializationMemo::Tensor& tensor = memo.tensors[kind];
      incremental += tensor.valid && c.recipes[kind] && SameGenerator(tensor.generator, *c.recipes[kind]) &&
                     tensor.elements == c.element_count(TensorKind(kind));
    }
    const bool skip_weights = rng() % 3 == 0;  // fuzz_gemm's device way, between full decodes
    ASSERT_TRUE(
        DecodeCaseInto(*bytes, reused, skip_weights ? Materialize::kAllButWeights : Materialize::kYes, &memo).ok())
        << "step " << i;
    absl::StatusOr<FuzzCase> fresh = DecodeCase(*bytes);
    ASSERT_TRUE(fresh.ok());
    if (skip_weights && fresh->recipe(TensorKind::kCodes)) fresh->packed_codes.clear();
    if (skip_weights && fresh->recipe(TensorKind::kScales)) fresh->scale_bytes.clear();
    ASSERT_EQ(reused, *fresh) << "step " << i << " (MXDIFF_SEED=" << seed << "):\n" << DescribeCase(*fresh);
  }
  EXPECT_GT(incremental, 500) << "the memo was hardly ever used: the test tests nothing";
}

TEST(CaseFormat, EveryProperPrefixAndAnyTrailingByteIsRejected) {
  for (const FuzzCase& c : {SmallCase(), RecipeCase()}) {
    std::vector<uint8_t> bytes = *EncodeCase(c);
    for (size_t size = 0; size < bytes.size(); ++size) {
      EXPECT_FALSE(DecodeCase(std::span<const uint8_t>(bytes.data(), size)).ok()) << "prefix of " << size;
    }
    bytes.push_back(0);
    const absl::StatusOr<FuzzCase> decoded = DecodeCase(bytes);
    ASSERT_FALSE(decoded.ok());
    EXPECT_NE(decoded.status().message().find("trailing"), std::string_view::npos) << decoded.status();
  }
}

// A byte patched at an offset of the encoded case.
struct Corruption {
  size_t offset;
  uint8_t value;
  const char* field;
};

void ExpectRejected(const std::vector<uint8_t>& good, const Corruption& corruption) {
  std::vector<uint8_t> bytes = good;
  ASSERT_LT(corruption.offset, bytes.size());
  bytes[corruption.offset] = corruption.value;
  const absl::StatusOr<FuzzCase> decoded = DecodeCase(bytes);
  ASSERT_FALSE(decoded.ok()) << corruption.field << " at " << corruption.offset;
  EXPECT_NE(decoded.status().message().find(corruption.field), std::string_view::npos)
      << "expected the error to name " << corruption.field << ": " << decoded.status();
}

// Byte offsets of the fixed header of version 2 (fuzz/README.md).
TEST(CaseFormat, OutOfRangeHeaderFieldsAreRejectedByName) {
  const std::vector<uint8_t> good = *EncodeCase(SmallCase());
  const Corruption corruptions[] = {
      {0, 'X', "magic"},     {4, 3, "version"},   {4, 0, "version"},         {5, 0, "groups"},
      {6, 1, "groups"},      {7, 0, "n"},         {9, 48, "k"},              {9, 16, "k"},
      {11, 4, "model"},      {12, 3, "request"},  {13, 2, "policy"},         {18, 6, "cta_k"},
      {20, 0, "splits"},     {22, 8, "swizzle"},  {23, 9, "registry_count"}, {16, 0, "cta_n"},
      {47, 2, "activations.source"},  // after the registry (2 entries) and 3 rows
  };
  for (const Corruption& corruption : corruptions) ExpectRejected(good, corruption);
}

// The recipe fields: offsets within RecipeCase's encoding (header 24, registry 10, rows 4).
TEST(CaseFormat, OutOfRangeRecipeFieldsAreRejectedByName) {
  const std::vector<uint8_t> good = *EncodeCase(RecipeCase());
  constexpr size_t kActivations = 24 + 10 + 4, kCodes = kActivations + 18, kScales = kCodes + 18;
  const Corruption corruptions[] = {
      {kActivations, 2, "activations.source"},
      {kActivations + 1, 6, "activations.class"},        // unknown value class
      {kActivations + 1, 5, "activations.class"},        // checkpoint: a scales class
      {kCodes + 1, 5, "codes.class"},
      {kScales + 1, 200, "scales.class"},
      {kActivations + 2, 31, "activations.rare_log2"},
      {kCodes + 11, 65, "codes.override_count"},          // too many overrides
      {kActivations + 12 + 3, 0x7F, "activations.override.index"},
      {kCodes + 12 + 3, 0x40, "codes.override.index"},    // index 2^30 + ...: past the last code
      {kCodes + 16, 0x10, "codes.override.value"},        // a code of 16
      {kScales + 17, 0x01, "scales.override.value"},      // a scale byte of 256 + 129
  };
  for (const Corruption& corruption : corruptions) ExpectRejected(good, corruption);
}

// Every shape bound, from both directions: the encoder refuses the case, the decoder the bytes.
void ExpectBoundRejected(const FuzzCase& c, const char* field) {
  const absl::StatusOr<std::vector<uint8_t>> bytes = EncodeCase(c);
  ASSERT_FALSE(bytes.ok()) << field << " was accepted by the encoder";
  EXPECT_NE(bytes.status().message().find(field), std::string_view::npos) << field << ": " << bytes.status();
  EXPECT_FALSE(ValidateCase(c).ok());
}

// A description only (nothing materialized, so shapes past the bounds cost nothing).
FuzzCase RecipeShape(int groups, int n, int k, std::vector<int> rows) {
  FuzzCase c;
  c.groups = groups;
  c.n = n;
  c.k = k;
  c.row_offsets.assign(size_t(groups) + 1, 0);
  for (int g = 0; g < groups; ++g) c.row_offsets[g + 1] = c.row_offsets[g] + rows[size_t(g)];
  for (int kind = 0; kind < kTensorKindCount; ++kind) c.recipes[kind] = TensorRecipe{};
  return c;
}

TEST(CaseFormat, EveryBoundIsRejectedWithTheFieldNamed) {
  // At the bounds: valid.
  EXPECT_TRUE(ValidateCase(RecipeShape(1, kMaxN, kMaxK, {kMaxRowsPerGroup})).ok());
  EXPECT_TRUE(ValidateCase(RecipeShape(kMaxGroups, 1024, 4096, std::vector<int>(kMaxGroups, 2))).ok());
  EXPECT_TRUE(ValidateCase(RecipeShape(8, 64, 64, std::vector<int>(8, kMaxRowsPerGroup))).ok());
  // One past them.
  ExpectBoundRejected(RecipeShape(1, kMaxN + 1, 32, {1}), "n = 8193");
  ExpectBoundRejected(RecipeShape(1, 64, kMaxK + kBlockK, {1}), "k = 8224");
  ExpectBoundRejected(RecipeShape(1, 64, 4016, {1}), "k = 4016 is not a multiple of 32");
  ExpectBoundRejected(RecipeShape(kMaxGroups + 1, 1, 32, std::vector<int>(kMaxGroups + 1, 0)), "groups = 257");
  ExpectBoundRejected(RecipeShape(2, 64, 64, {kMaxRowsPerGroup + 1, 0}), "rows = 65");
  std::vector<int> rows(9, 57);  // 513 rows
  ExpectBoundRejected(RecipeShape(9, 64, 64, rows), "rows total = 513");
  ExpectBoundRejected(RecipeShape(kMaxGroups, 2048, 4096, std::vector<int>(kMaxGroups, 0)), "groups x n x k");
  {
    FuzzCase c = RecipeShape(1, 64, 64, {1});
    c.recipe(TensorKind::kScales)->overrides.assign(kMaxOverrides + 1, TensorOverride{0, 120});
    ExpectBoundRejected(c, "scales.override_count = 65");
  }
  {
    FuzzCase c = RecipeShape(1, 64, 64, {1});
    c.recipe(TensorKind::kCodes)->overrides = {{64 * 64, 1}};  // one past the last code
    ExpectBoundRejected(c, "codes.override.index = 4096");
    c.recipe(TensorKind::kCodes)->overrides = {{64 * 64 - 1, 16}};
    ExpectBoundRejected(c, "codes.override.value = 16");
    c.recipe(TensorKind::kCodes)->overrides = {{uint32_t(-1), 1}};
    ExpectBoundRejected(c, "codes.override.index");
  }
  {
    FuzzCase c = RecipeShape(1, 64, 64, {0});  // no rows: no activation element to override
    c.recipe(TensorKind::kActivations)->overrides = {{0, 1}};
    ExpectBoundRejected(c, "activations.override.index");
  }
  {
    FuzzCase c = RecipeShape(1, 64, 64, {1});
    c.recipe(TensorKind::kActivations)->value_class = ValueClass::kCheckpoint;
    ExpectBoundRejected(c, "activations.class = 5 (checkpoint) is not a class of activations");
    c.recipe(TensorKind::kActivations)->value_class = ValueClass(9);
    ExpectBoundRejected(c, "activations.class = 9");
    c.recipe(TensorKind::kActivations)->value_class = ValueClass::kNormal;
    c.recipe(TensorKind::kActivations)->rare_log2 = kMaxRareLog2 + 1;
    ExpectBoundRejected(c, "activations.rare_log2 = 31");
  }
  {
    FuzzCase c;  // byte by byte, a tensor past the explicit limit: 2 MB of codes
    const int one_row[] = {1};
    ResizeCase(c, 1, 1024, 4096, one_row);
    ExpectBoundRejected(c, "codes byte by byte would take 2097152 bytes");
  }
  {
    FuzzCase c = RecipeShape(1, 64, 64, {1});
    c.recipe(TensorKind::kScales).reset();  // byte by byte but the vector is empty
    ExpectBoundRejected(c, "scales");
  }
}

TEST(CaseFormat, ValidateRefusesAMaterializationOfTheWrongSize) {
  FuzzCase c = RecipeCase();
  c.scale_bytes.pop_back();
  const absl::Status status = ValidateCase(c);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("scales has"), std::string_view::npos) << status;
}

TEST(CaseFormat, PayloadSizeMismatchIsRejectedByTheEncoder) {
  FuzzCase c = SmallCase();
  c.scale_bytes.pop_back();
  const absl::Status status = ValidateCase(c);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("scales"), std::string_view::npos) << status;
}

TEST(CaseFormat, RandomBytesDecodeOrAreRejectedWithoutCrashing) {
  CaseRng rng(mxdiff::testing::TestSeed());
  for (const FuzzCase& base : {SmallCase(), RecipeShape(3, 40, 96, {1, 0, 2})}) {
    FuzzCase start = base;
    if (start.recipe(TensorKind::kCodes)) start.recipe(TensorKind::kCodes)->overrides = {{7, 3}, {100, 15}};
    const std::vector<uint8_t> good = *EncodeCase(start);
    int decoded_count = 0;
    for (int i = 0; i < 20000; ++i) {
      std::vector<uint8_t> bytes = good;
      for (int flips = 1 + int(rng() % 3); flips > 0; --flips) bytes[rng() % bytes.size()] = uint8_t(rng());
      if (rng() % 4 == 0) bytes.resize(rng() % bytes.size());
      FuzzCase decoded;
      if (!DecodeCaseInto(bytes, decoded, Materialize::kNo).ok()) continue;
      ++decoded_count;
      ASSERT_TRUE(ValidateCase(decoded).ok());
      ASSERT_EQ(*EncodeCase(decoded), bytes);  // decoding is exact: nothing clamped or guessed
    }
    EXPECT_GT(decoded_count, 0);
  }
}

TEST(CaseFormat, GroupsWithRowsAndElementCounts) {
  const FuzzCase c = RecipeCase();
  EXPECT_EQ(c.GroupsWithRows(), (std::vector<int>{1, 3}));
  EXPECT_EQ(c.group_rows(3), 2);
  EXPECT_EQ(c.element_count(TensorKind::kActivations), 3u * 4096);
  EXPECT_EQ(c.element_count(TensorKind::kCodes), 4u * 1024 * 4096);
  EXPECT_EQ(c.element_count(TensorKind::kScales), 4u * 1024 * 128);
}

TEST(CaseFormat, MaxEncodedSizeBoundsEveryCase) {
  // Every tensor at the explicit limit: 1 MiB each plus the header, registry and rows.
  EXPECT_EQ(MaxEncodedSize(), 24u + 8 * 10 + 256 + 3 * (1 + kMaxExplicitTensorBytes));
  EXPECT_LE(EncodedSize(RecipeCase()), MaxEncodedSize());
}

TEST(CaseFormat, DescribeNamesTheFieldsAndTheRecipe) {
  const std::string text = DescribeCase(SmallCase());
  for (const char* part : {"groups 3", "N = 2", "K = 64", "8x128x64", "folded", "fail-closed", "v100", "byte by byte"}) {
    EXPECT_NE(text.find(part), std::string::npos) << part << " missing in:\n" << text;
  }
  const std::string recipe = DescribeCase(RecipeCase());
  for (const char* part : {"activations: recipe narrow seed 0x1234 rare 2^-4, 1 overrides: [row 1, k 0] = 0x7c00",
                           "codes: recipe uniform seed 0xc0de, 1 overrides: [group 1, n 1023, k 4095] = 0x7",
                           "scales: recipe checkpoint seed 0x5ca1e rare 2^-16, 2 overrides: [group 1, n 1023, block "
                           "127 = k 4064..4095] = 0x81; [group 0, n 0, block 0 = k 0..31] = 0x70"}) {
    EXPECT_NE(recipe.find(part), std::string::npos) << part << " missing in:\n" << recipe;
  }
  FuzzCase many = RecipeShape(256, 8, 32, std::vector<int>(256, 0));
  ResizeCase(many, 256, 8, 32, [] {
    std::vector<int> rows(256, 0);
    rows[3] = 1;
    rows[200] = 2;
    return rows;
  }());
  MaterializeCase(many);
  const std::string sparse = DescribeCase(many);
  EXPECT_NE(sparse.find("groups 256, 2 with rows: g3=1 g200=2 (M = 3)"), std::string::npos) << sparse;
}

// ---- version 1: every v1 file still decodes, to exactly what version 1 said.

// An independent reading of the version 1 layout (the table of fuzz/README.md before version
// 2), not sharing the decoder's field list.
struct V1Case {
  int groups, n, k, model, request, policy;
  Tactic tactic;
  std::vector<RegistryEntry> registry;
  std::vector<int> rows;
  std::vector<uint16_t> activations;
  std::vector<uint8_t> codes, scales;
};

bool ParseV1(const std::vector<uint8_t>& b, V1Case& v) {
  size_t at = 0;
  auto u8 = [&] { return at < b.size() ? int(b[at++]) : -1; };
  auto u16 = [&] {
    const int lo = u8(), hi = u8();
    return lo < 0 || hi < 0 ? -1 : lo | hi << 8;
  };
  auto tactic = [&](Tactic& t) {
    t.cta_m = u16();
    t.cta_n = u16();
    t.cta_k = u16();
    t.splits = u16();
    t.swizzle = u8();
  };
  if (b.size() < 23 || b[0] != 'M' || b[1] != 'X' || b[2] != 'D' || b[3] != 'F' || b[4] != 1) return false;
  at = 5;
  v.groups = u8();
  v.n = u16();
  v.k = u16();
  v.model = u8();
  v.request = u8();
  v.policy = u8();
  tactic(v.tactic);
  v.registry.resize(size_t(u8()));
  for (RegistryEntry& entry : v.registry) {
    tactic(entry.tactic);
    entry.transform = Transform(u8());
  }
  int m = 0;
  for (int g = 0; g < v.groups; ++g) m += v.rows.emplace_back(u8());
  const size_t acts = size_t(m) * v.k, codes = size_t(v.groups) * v.n * v.k / 2, scales = codes / 16;
  if (b.size() != at + 2 * acts + codes + scales) return false;
  v.activations.resize(acts);
  if (acts != 0) std::memcpy(v.activations.data(), b.data() + at, 2 * acts);
  v.codes.assign(b.begin() + long(at + 2 * acts), b.begin() + long(at + 2 * acts + codes));
  v.scales.assign(b.begin() + long(at + 2 * acts + codes), b.end());
  return true;
}

void ExpectSameAsV1(const V1Case& v, const FuzzCase& c, const std::string& where) {
  EXPECT_EQ(c.groups, v.groups) << where;
  EXPECT_EQ(c.n, v.n) << where;
  EXPECT_EQ(c.k, v.k) << where;
  EXPECT_EQ(int(c.model), v.model) << where;
  EXPECT_EQ(int(c.request), v.request) << where;
  EXPECT_EQ(int(c.policy), v.policy) << where;
  EXPECT_EQ(c.tactic, v.tactic) << where;
  EXPECT_EQ(c.registry, v.registry) << where;
  for (int g = 0; g < v.groups; ++g) EXPECT_EQ(c.group_rows(g), v.rows[g]) << where << " group " << g;
  EXPECT_EQ(c.activations, v.activations) << where;
  EXPECT_EQ(c.packed_codes, v.codes) << where;
  EXPECT_EQ(c.scale_bytes, v.scales) << where;
  for (const auto& recipe : c.recipes) EXPECT_FALSE(recipe.has_value()) << where << ": v1 has no recipes";
}

TEST(CaseFormatV1, AFixedV1CaseDecodesAsVersion1Said) {
  // groups 2, N 1, K 32, model exact, request folded, policy fail-closed, tactic 16x128x32/s2/w1,
  // one registry entry (the same tactic, folded), rows 1 and 0, then the payload.
  std::vector<uint8_t> bytes = {'M', 'X', 'D', 'F', 1, 2, 1, 0, 32, 0, 3, 1, 1, 16, 0, 128, 0, 32, 0, 2, 0, 1,
                                1,   16,  0,   128, 0, 32, 0, 2, 0, 1, 1, 1, 0};
  for (int i = 0; i < 32; ++i) bytes.insert(bytes.end(), {uint8_t(i), 0x3C});  // activations 0x3C00 + i
  for (int i = 0; i < 32; ++i) bytes.push_back(uint8_t(0x10 * (i % 16) + i % 16));  // codes, 2 groups x 16 bytes
  bytes.insert(bytes.end(), {120, 129});  // one scale byte per group
  const absl::StatusOr<FuzzCase> decoded = DecodeCase(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  const FuzzCase& c = *decoded;
  EXPECT_EQ(c.groups, 2);
  EXPECT_EQ(c.n, 1);
  EXPECT_EQ(c.k, 32);
  EXPECT_EQ(c.model, StepModel::kExact);
  EXPECT_EQ(c.request, TransformRequest::kFolded);
  EXPECT_EQ(c.policy, FallbackPolicy::kFailClosed);
  EXPECT_EQ(c.tactic, (Tactic{16, 128, 32, 2, 1}));
  EXPECT_EQ(c.registry, (std::vector<RegistryEntry>{{Tactic{16, 128, 32, 2, 1}, Transform::kFolded}}));
  EXPECT_EQ(c.row_offsets, (std::vector<int32_t>{0, 1, 1}));
  EXPECT_EQ(c.activations[31], 0x3C1F);
  EXPECT_EQ(c.packed_codes[17], 0x11);
  EXPECT_EQ(c.scale_bytes, (std::vector<uint8_t>{120, 129}));
  // Re-encoded it is a version 2 file of the same case.
  const std::vector<uint8_t> v2 = *EncodeCase(c);
  EXPECT_EQ(v2[4], 2);
  EXPECT_EQ(*DecodeCase(v2), c);
  // Version 1's own bounds still hold for version 1 files: 9 groups was never a v1 case.
  std::vector<uint8_t> nine = bytes;
  nine[5] = 9;
  const absl::StatusOr<FuzzCase> rejected = DecodeCase(nine);
  ASSERT_FALSE(rejected.ok());
  EXPECT_NE(rejected.status().message().find("groups = 9"), std::string_view::npos) << rejected.status();
}

TEST(CaseFormatV1, EveryV1FileInCorpusDecodesToTheSameCaseAsBefore) {
  namespace fs = std::filesystem;
  int v1_files = 0, v2_files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(MXDIFF_CORPUS_DIR)) {
    if (!entry.is_regular_file() || entry.path().extension() == ".md") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // Cases only: other targets' corpora (e.g. safetensors files) are in formats of their own.
    if (bytes.size() < 5 || std::memcmp(bytes.data(), kCaseMagic, 4) != 0) continue;
    const absl::StatusOr<FuzzCase> decoded = DecodeCase(bytes);
    ASSERT_TRUE(decoded.ok()) << entry.path() << ": " << decoded.status();
    if (bytes[4] != 1) {
      ++v2_files;
      continue;
    }
    ++v1_files;
    V1Case v1;
    ASSERT_TRUE(ParseV1(bytes, v1)) << entry.path() << " is not a version 1 case by the v1 table";
    ExpectSameAsV1(v1, *decoded, entry.path().string());
    EXPECT_EQ(*DecodeCase(*EncodeCase(*decoded)), *decoded) << entry.path() << ": v1 -> v2 is lossless";
  }
  std::printf("corpus/: %d version 1 files, %d version 2 files\n", v1_files, v2_files);
  EXPECT_GE(v1_files, 8);  // at least corpus/regressions/, which the campaign never rewrites
}

}  // namespace
}  // namespace mxdiff::fuzz
