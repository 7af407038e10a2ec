#include "reference/mx_spec.h"

#include <cmath>

#include "reference/error_bound.h"
#include "reference/gemm_plan.h"

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

// The fast path's E2M1 tables come from the one value table: each code's fp32 value and exponent
// field are those of the spec's element at scale 1 (raw 127).
TEST(MxSpecTest, FastPathE2m1TablesAreTheSpecValues) {
  for (int code = 0; code < 16; ++code) {
    const double value = MxSpecElement(uint8_t(code), 127).ToDouble();
    EXPECT_EQ(f32_to_bits(internal::kE2m1.value[code]), f32_to_bits(float(value))) << code;
    EXPECT_EQ(internal::kE2m1.field[code], value == 0 ? internal::kV100ZeroField
                                                      : int32_t(f32_to_bits(float(value)) >> 23 & 0xFF))
        << code;
  }
}

ElementProducts Products(std::initializer_list<std::pair<double, double>> activation_weight) {
  ElementProducts products;
  for (const auto& [activation, weight] : activation_weight) products.Add(activation, weight);
  return products;
}

// Bound mode's verdict where spec weights leave fp32's range (docs/numerics.md: "The MX
// specification as the contract"): an infinity or NaN only where some fp32 order reaches it.
TEST(MxSpecTest, BoundVerdictAllowsOnlyTheOverflowsSomeFp32OrderReaches) {
  const double w = MxSpecElement(0x1, 254).ToDouble();  // 0.5 x 2^127
  const double bound = 1.0;                              // small: the limits below decide
  const auto verdict = [&](const ElementProducts& e, double got) { return BoundVerdict(e, bound, -1.0, 1.0, got); };
  // 2^127 + 2^127 reaches 2^128 in fp32: NaN (Inf - Inf) and either Inf are correct, as is 0.
  const ElementProducts reaches = Products({{2, w}, {2, w}, {-2, w}, {-2, w}});
  EXPECT_EQ(verdict(reaches, 0.0), BoundStatus::kWithin);
  EXPECT_EQ(verdict(reaches, NAN), BoundStatus::kWithin);
  EXPECT_EQ(verdict(reaches, INFINITY), BoundStatus::kWithin);
  EXPECT_EQ(verdict(reaches, -INFINITY), BoundStatus::kWithin);
  EXPECT_EQ(verdict(reaches, 2.0), BoundStatus::kOutside);
  // 2^127 + (2^127 - 2^116) stays below 2^128 - 2^103: no +Inf, so no NaN either.
  const ElementProducts below = Products({{2, w}, {2 - 0x1p-10, w}, {-2, w}, {-2, w}});
  EXPECT_EQ(verdict(below, NAN), BoundStatus::kOutside);
  EXPECT_EQ(verdict(below, INFINITY), BoundStatus::kOutside);
  EXPECT_EQ(verdict(below, -INFINITY), BoundStatus::kWithin);
  // A weight past fp32's range (2 x 2^127) times zero: an fp32 kernel's Inf x 0 is NaN; 1.5 x 2^127 is
  // an fp32 value, whose zero product stays zero.
  EXPECT_EQ(verdict(Products({{0, MxSpecElement(0x4, 254).ToDouble()}}), NAN), BoundStatus::kWithin);
  EXPECT_EQ(verdict(Products({{0, MxSpecElement(0x3, 254).ToDouble()}}), NAN), BoundStatus::kOutside);
  // Real specials as before: a NaN block is NaN; an Inf activation keeps its sign.
  EXPECT_EQ(verdict(Products({{0, MxSpecElement(0x0, 0xFF).ToDouble()}}), 0.0), BoundStatus::kSpecialLost);
  EXPECT_EQ(verdict(Products({{-INFINITY, 1.0}}), -INFINITY), BoundStatus::kWithin);
  EXPECT_EQ(verdict(Products({{-INFINITY, 1.0}}), INFINITY), BoundStatus::kSpecialLost);
  EXPECT_EQ(verdict(Products({{-INFINITY, 1.0}}), NAN), BoundStatus::kSpecialLost);
}

// For fp16 weights (the SM70 transforms) nothing reaches fp32's overflow: the verdict is the window's.
TEST(MxSpecTest, BoundVerdictOfFp16WeightsIsTheWindow) {
  const ElementProducts e = Products({{65504, 98304}, {65504, 98304}, {-65504, 98304}});
  EXPECT_EQ(BoundVerdict(e, 1.0, 6.0e9, 7.0e9, 6.4e9), BoundStatus::kWithin);
  EXPECT_EQ(BoundVerdict(e, 1.0, 6.0e9, 7.0e9, INFINITY), BoundStatus::kOutside);
  EXPECT_EQ(BoundVerdict(e, 1.0, 6.0e9, 7.0e9, NAN), BoundStatus::kOutside);
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
