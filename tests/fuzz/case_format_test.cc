#include "fuzz/case_format.h"

#include <random>

#include "fuzz/case_mutator.h"
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

TEST(CaseFormat, RoundTripsAFixedCaseByteForByte) {
  const FuzzCase c = SmallCase();
  absl::StatusOr<std::vector<uint8_t>> bytes = EncodeCase(c);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(bytes->size(), EncodedSize(c));
  // The documented header (fuzz/README.md): magic, version, groups, n, k.
  const std::vector<uint8_t> head(bytes->begin(), bytes->begin() + 10);
  EXPECT_EQ(head, (std::vector<uint8_t>{'M', 'X', 'D', 'F', 1, 3, 2, 0, 64, 0}));
  absl::StatusOr<FuzzCase> decoded = DecodeCase(*bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, c);
  EXPECT_EQ(*EncodeCase(*decoded), *bytes);
}

TEST(CaseFormat, RoundTripsRandomCases) {
  CaseRng rng(mxdiff::testing::TestSeed());
  const MutationProfile wide{kMaxGroups, kMaxRowsPerGroup, 64, kMaxK};
  for (int i = 0; i < 300; ++i) {
    const FuzzCase c = RandomCase(rng, wide);
    absl::StatusOr<std::vector<uint8_t>> bytes = EncodeCase(c);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    absl::StatusOr<FuzzCase> decoded = DecodeCase(*bytes);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    ASSERT_EQ(*decoded, c) << "case " << i;
  }
}

TEST(CaseFormat, EveryProperPrefixAndAnyTrailingByteIsRejected) {
  std::vector<uint8_t> bytes = *EncodeCase(SmallCase());
  for (size_t size = 0; size < bytes.size(); ++size) {
    EXPECT_FALSE(DecodeCase(std::span<const uint8_t>(bytes.data(), size)).ok()) << "prefix of " << size;
  }
  bytes.push_back(0);
  const absl::StatusOr<FuzzCase> decoded = DecodeCase(bytes);
  ASSERT_FALSE(decoded.ok());
  EXPECT_NE(decoded.status().message().find("trailing"), std::string_view::npos) << decoded.status();
}

// Byte offsets of the fixed header (fuzz/README.md).
struct Corruption {
  size_t offset;
  uint8_t value;
  const char* field;
};

TEST(CaseFormat, OutOfRangeFieldsAreRejectedByName) {
  const std::vector<uint8_t> good = *EncodeCase(SmallCase());
  const Corruption corruptions[] = {
      {0, 'X', "magic"},       {4, 2, "version"},          {5, 0, "groups"},          {5, 9, "groups"},
      {6, 0, "n"},             {8, 48, "k"},               {8, 16, "k"},              {10, 4, "model"},
      {11, 3, "request"},      {12, 2, "policy"},          {17, 6, "cta_k"},          {19, 0, "splits"},
      {21, 8, "swizzle"},      {22, 9, "registry_count"},  {15, 0, "cta_n"},
  };
  for (const Corruption& corruption : corruptions) {
    std::vector<uint8_t> bytes = good;
    bytes[corruption.offset] = corruption.value;
    const absl::StatusOr<FuzzCase> decoded = DecodeCase(bytes);
    ASSERT_FALSE(decoded.ok()) << corruption.field << " at " << corruption.offset;
    EXPECT_NE(decoded.status().message().find(corruption.field), std::string_view::npos) << decoded.status();
  }
}

TEST(CaseFormat, TooManyRowsInAGroupIsRejected) {
  FuzzCase c = SmallCase();
  const int rows[] = {kMaxRowsPerGroup + 1};
  ResizeCase(c, 1, 2, 64, rows);
  EXPECT_FALSE(EncodeCase(c).ok());
  EXPECT_FALSE(ValidateCase(c).ok());
}

TEST(CaseFormat, PayloadSizeMismatchIsRejectedByTheEncoder) {
  FuzzCase c = SmallCase();
  c.scale_bytes.pop_back();
  const absl::Status status = ValidateCase(c);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("scale_bytes"), std::string_view::npos) << status;
}

TEST(CaseFormat, RandomBytesDecodeOrAreRejectedWithoutCrashing) {
  CaseRng rng(mxdiff::testing::TestSeed());
  const std::vector<uint8_t> good = *EncodeCase(SmallCase());
  int decoded_count = 0;
  for (int i = 0; i < 20000; ++i) {
    std::vector<uint8_t> bytes = good;
    for (int flips = 1 + int(rng() % 3); flips > 0; --flips) bytes[rng() % bytes.size()] = uint8_t(rng());
    if (rng() % 4 == 0) bytes.resize(rng() % bytes.size());
    absl::StatusOr<FuzzCase> decoded = DecodeCase(bytes);
    if (!decoded.ok()) continue;
    ++decoded_count;
    ASSERT_TRUE(ValidateCase(*decoded).ok());
    ASSERT_EQ(*EncodeCase(*decoded), bytes);  // decoding is exact: nothing clamped or guessed
  }
  EXPECT_GT(decoded_count, 0);
}

TEST(CaseFormat, DescribeNamesTheFields) {
  const std::string text = DescribeCase(SmallCase());
  for (const char* part : {"groups 3", "N = 2", "K = 64", "8x128x64", "folded", "fail-closed", "v100"}) {
    EXPECT_NE(text.find(part), std::string::npos) << part << " missing in:\n" << text;
  }
}

}  // namespace
}  // namespace mxdiff::fuzz
