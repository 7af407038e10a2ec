#include "reference/fold_proof.h"

#include "gtest/gtest.h"

namespace mxdiff {
namespace {

ScaleHistogram Observed(int first, int last) {
  ScaleHistogram histogram{};
  for (int raw = first; raw <= last; ++raw) histogram[raw] = 7;
  return histogram;
}

TEST(FoldProofTest, TheSeedsCheckpointRangeGives208Of208) {
  const FoldProof proof = ProveFoldOver(Observed(114, 126));
  EXPECT_TRUE(proof.Holds());
  EXPECT_EQ(proof.patterns, 208);
  EXPECT_EQ(proof.equal, 208);
  EXPECT_EQ(proof.Describe(), "raw 114..126: 13 bytes x 16 codes = 208 patterns, 208 equal");
}

TEST(FoldProofTest, AByteBelowTheRangeIsNamedWithItsFirstDifference) {
  ScaleHistogram histogram = Observed(114, 126);
  histogram[112] = 1;
  const FoldProof proof = ProveFoldOver(histogram);
  EXPECT_FALSE(proof.Holds());
  EXPECT_EQ(proof.patterns, 224);
  EXPECT_EQ(proof.equal, 210);  // raw 112 keeps only +0 and -0: ordinary flushes, folded halves
  ASSERT_EQ(proof.differing.size(), 14u);
  // Code 0x1 is 0.5: ordinary 0.5 x 2^-15 x 2^14 x 0 = +0; folded 2^-15 x 2^-1 = 2^-16 (0x0100).
  EXPECT_EQ(proof.Describe(),
            "raw 112,114,115,116,117,118,119,120,121,122,123,124,125,126: 14 bytes x 16 codes = 224 patterns, 210 "
            "equal; first difference raw 112 code 0x1: ordinary 0x0000, folded 0x0100");
}

TEST(FoldProofTest, AgreesWithTheAdmissionSetByteByByte) {
  for (int raw = 0; raw < 256; ++raw) {
    EXPECT_EQ(ProveFoldOver(Observed(raw, raw)).Holds(), FoldAdmitted(uint8_t(raw))) << raw;
  }
}

TEST(FoldProofTest, NothingObservedProvesNothing) {
  const FoldProof proof = ProveFoldOver(ScaleHistogram{});
  EXPECT_FALSE(proof.Holds());
  EXPECT_EQ(proof.Describe(), "no byte: 0 bytes x 16 codes = 0 patterns, 0 equal");
}

}  // namespace
}  // namespace mxdiff
