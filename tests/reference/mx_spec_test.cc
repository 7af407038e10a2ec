#include "reference/mx_spec.h"

#include <cmath>

#include "gtest/gtest.h"

namespace mxdiff {
namespace {

TEST(MxSpecTest, ElementValues) {
  EXPECT_EQ(MxSpecElement(0x7, 127).ToDouble(), 6.0);
  EXPECT_EQ(MxSpecElement(0x1, 127).ToDouble(), 0.5);
  EXPECT_EQ(MxSpecElement(0xF, 130).ToDouble(), -48.0);
  EXPECT_EQ(MxSpecElement(0x2, 0).ToDouble(), std::ldexp(1.0, -127));
  EXPECT_EQ(MxSpecElement(0x7, 254).ToDouble(), 6.0 * std::ldexp(1.0, 127));
  EXPECT_TRUE(std::signbit(MxSpecElement(0x8, 127).ToDouble()));
  EXPECT_TRUE(MxSpecElement(0x3, 0xFF).nan);
  EXPECT_TRUE(std::isnan(MxSpecElement(0x0, 0xFF).ToDouble()));
}

// Every (transform, code, raw) falls in the class its raw byte's adjusted exponent predicts.
TEST(MxSpecTest, DeviationClassesOverAllCodesAndBytes) {
  for (int raw = 0; raw < 256; ++raw) {
    for (int code = 0; code < 16; ++code) {
      const bool zero_code = (code & 7) == 0;
      const int halves = std::abs(E2m1Halves(uint8_t(code)));  // |e2m1| x 2
      SpecDeviation ordinary_want, folded_want;
      if (raw == 0xFF) {
        ordinary_want = SpecDeviation::kNaNDropped;
        folded_want = SpecDeviation::kNaNDropped;
      } else if (zero_code) {
        ordinary_want = SpecDeviation::kNone;
        folded_want = raw == 129 ? SpecDeviation::kSpuriousNaN : SpecDeviation::kNone;
      } else {
        // ordinary: flush below 113, exact up to the fp16 range, saturated at 2^15 above 142.
        if (raw <= 112) {
          ordinary_want = SpecDeviation::kFlushedToZero;
        } else if (std::ldexp(halves / 2.0, std::min(raw, 142) - 127) >= 65520) {  // rounds to fp16 Inf
          ordinary_want = SpecDeviation::kOverflowToInf;
        } else {
          ordinary_want = raw <= 142 ? SpecDeviation::kNone : SpecDeviation::kSaturated;
        }
        // folded: x/2 (enlarged, or exact at raw 112) below 113, equal to ordinary to 128, Inf at 129.
        // Above, the scale is -2^(a-33) (a = 18: -0), so the weight is -e2m1 x 2^(a-47): a sign spill,
        // or a zero where that is at most 2^-25 (half the smallest fp16 subnormal; the tie goes to 0).
        if (raw <= 112) {
          folded_want = raw == 112 ? SpecDeviation::kNone : SpecDeviation::kEnlarged;
        } else if (raw <= 128) {
          folded_want = SpecDeviation::kNone;
        } else if (raw == 129) {
          folded_want = SpecDeviation::kOverflowToInf;
        } else {
          const int a = raw - 112 > 30 ? 30 : raw - 112;
          const bool underflows = a == 18 || std::ldexp(halves, a - 48) <= std::ldexp(1.0, -25);
          folded_want = underflows ? SpecDeviation::kFlushedToZero : SpecDeviation::kSignSpill;
        }
      }
      EXPECT_EQ(ClassifyAgainstSpec(Transform::kOrdinary, uint8_t(code), uint8_t(raw)), ordinary_want)
          << "ordinary code " << code << " raw " << raw;
      EXPECT_EQ(ClassifyAgainstSpec(Transform::kFolded, uint8_t(code), uint8_t(raw)), folded_want)
          << "folded code " << code << " raw " << raw;
    }
  }
}

TEST(MxSpecTest, DeviationNamesAreDistinct) {
  for (int i = 0; i < kSpecDeviationCount; ++i) {
    for (int j = i + 1; j < kSpecDeviationCount; ++j) {
      EXPECT_NE(SpecDeviationName(SpecDeviation(i)), SpecDeviationName(SpecDeviation(j)));
    }
  }
}

}  // namespace
}  // namespace mxdiff
