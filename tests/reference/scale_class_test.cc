#include "reference/scale_class.h"

#include "gtest/gtest.h"
#include "reference/admission.h"

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

}  // namespace
}  // namespace mxdiff
