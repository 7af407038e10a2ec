#include "reference/scale_class.h"

#include <set>

#include "gtest/gtest.h"
#include "reference/admission.h"
#include "reference/checkpoint_scales.h"

namespace mxdiff {
namespace {

TEST(ScaleClassTest, AdmittedIsExactlyTheDerivedAdmission) {
  for (int raw = 0; raw < 256; ++raw) {
    EXPECT_EQ(ClassifyScale(uint8_t(raw)) == ScaleClass::kAdmitted, FoldAdmitted(uint8_t(raw))) << raw;
  }
}

TEST(ScaleClassTest, ClassesAreTheDocumentedContiguousRanges) {
  const struct {
    ScaleClass scale_class;
    int first, last;
  } expected[] = {{ScaleClass::kFlushed, 0, 112},    {ScaleClass::kAdmitted, 113, 128},
                  {ScaleClass::kFoldedInf, 129, 129}, {ScaleClass::kSignSpill, 130, 141},
                  {ScaleClass::kSaturated, 142, 255}};
  for (const auto& e : expected) {
    const RawRange range = ScaleClassRange(e.scale_class);
    EXPECT_EQ(range.first, e.first) << ScaleClassName(e.scale_class);
    EXPECT_EQ(range.last, e.last) << ScaleClassName(e.scale_class);
    for (int raw = e.first; raw <= e.last; ++raw) EXPECT_EQ(ClassifyScale(uint8_t(raw)), e.scale_class) << raw;
  }
}

TEST(ScaleClassTest, NamesAreDistinctAndFileNameSafe) {
  for (int a = 0; a < kScaleClassCount; ++a) {
    const std::string_view name = ScaleClassName(ScaleClass(a));
    EXPECT_EQ(name.find_first_of("/ \\"), std::string_view::npos) << name;
    for (int b = 0; b < a; ++b) EXPECT_NE(name, ScaleClassName(ScaleClass(b)));
  }
}

// The checkpoint's bytes (reference/checkpoint_scales.h, the one home of 114..126): inside the
// derived admission (every byte of the checkpoint is admitted, docs/numerics.md: transforms), and
// CheckpointScaleOf picks each of them, and only them.
TEST(CheckpointScalesTest, AreTheCheckpointsAdmittedBytesAndEachIsPicked) {
  EXPECT_EQ(kCheckpointScaleFirst, 114);
  EXPECT_EQ(kCheckpointScaleLast, 126);
  EXPECT_EQ(kCheckpointScaleCount, 13);
  for (int raw = 0; raw < 256; ++raw) {
    const bool inside = raw >= 114 && raw <= 126;
    EXPECT_EQ(IsCheckpointScale(uint8_t(raw)), inside) << raw;
    if (inside) EXPECT_EQ(ClassifyScale(uint8_t(raw)), ScaleClass::kAdmitted) << raw;
  }
  std::set<int> picked;
  for (uint64_t bits = 0; bits < 4 * 13; ++bits) picked.insert(CheckpointScaleOf(bits));
  for (uint64_t bits : {~uint64_t(0), uint64_t(1) << 63, uint64_t(0x9E3779B97F4A7C15)}) {
    picked.insert(CheckpointScaleOf(bits));
  }
  EXPECT_EQ(picked.size(), 13u);
  EXPECT_EQ(*picked.begin(), 114);
  EXPECT_EQ(*picked.rbegin(), 126);
}

}  // namespace
}  // namespace mxdiff
