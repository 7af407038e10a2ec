// Exhaustive properties of both dequant transforms over all 16 codes x 256 scale bytes, with
// exact fp16 bits where the transforms leave the MX value (docs/numerics.md: transforms).
#include "reference/transform.h"

#include <array>
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "reference/admission.h"
#include "reference/fp16.h"
#include "reference/mx_spec.h"
#include "reference/prepare_layer_scales.h"

namespace mxdiff {
namespace {

uint16_t Ordinary(int code, int raw) {
  return dequantize(Transform::kOrdinary, uint8_t(code), prepared_scale(Transform::kOrdinary, uint8_t(raw)));
}
uint16_t Folded(int code, int raw) {
  return dequantize(Transform::kFolded, uint8_t(code), prepared_scale(Transform::kFolded, uint8_t(raw)));
}

// fp16 bits of e2m1(code) x 2^exponent where that is a normal fp16 (built from fields, not by
// any multiply): magnitude codes 2..7 are normal e2m1 values 1, 1.5, 2, 3, 4, 6.
uint16_t NormalF16(int code, int exponent) {
  static constexpr int kExponent[8] = {0, -1, 0, 0, 1, 1, 2, 2};  // e2m1 value = 1.m x 2^e
  static constexpr int kMantissa[8] = {0, 0, 0, 0x200, 0, 0x200, 0, 0x200};
  const int field = kExponent[code & 7] + exponent + 15;
  return uint16_t(((code & 8) << 12) | (field << 10) | kMantissa[code & 7]);
}

TEST(TransformTest, PlacementIsE2m1TimesTwoPowMinus14) {
  const uint16_t want[16] = {0x0000, 0x0200, 0x0400, 0x0600, 0x0800, 0x0A00, 0x0C00, 0x0E00,
                             0x8000, 0x8200, 0x8400, 0x8600, 0x8800, 0x8A00, 0x8C00, 0x8E00};
  for (int code = 0; code < 16; ++code) {
    EXPECT_EQ(place_e2m1(uint8_t(code)), want[code]) << code;
    EXPECT_EQ(double(f16_to_f32(place_e2m1(uint8_t(code)))), std::ldexp(E2m1Halves(uint8_t(code)), -15))
        << code;
  }
}

TEST(TransformTest, PreparingALayerGivesPreparedScaleOfEveryByte) {
  std::vector<uint8_t> bytes;
  for (int repeat = 0; repeat < 3; ++repeat) {
    for (int raw = 0; raw < 256; ++raw) bytes.push_back(uint8_t(repeat == 1 ? 255 - raw : raw));
  }
  for (Transform transform : {Transform::kOrdinary, Transform::kFolded}) {
    std::vector<uint16_t> prepared(bytes.size(), 0xAAAA);
    PrepareLayerScales(transform, bytes, prepared);
    for (size_t i = 0; i < bytes.size(); ++i) {
      ASSERT_EQ(prepared[i], prepared_scale(transform, bytes[i])) << "transform " << int(transform) << " at " << i;
    }
  }
}

TEST(TransformTest, AdjustedExponentClamps) {
  for (int raw = 0; raw < 256; ++raw) {
    const int want = raw <= 112 ? 0 : (raw >= 142 ? 30 : raw - 112);
    EXPECT_EQ(adjusted_exponent(uint8_t(raw)), want) << raw;
    EXPECT_EQ(prepared_scale(Transform::kOrdinary, uint8_t(raw)), uint16_t(want << 10)) << raw;
    EXPECT_EQ(prepared_scale(Transform::kFolded, uint8_t(raw)), uint16_t((want + 14) << 10)) << raw;
  }
}

// All 16 x 256: the exact bits of each class.
TEST(TransformTest, ExhaustiveBitsOfBothTransforms) {
  for (int raw = 0; raw < 256; ++raw) {
    const int a = adjusted_exponent(uint8_t(raw));
    for (int code = 0; code < 16; ++code) {
      const bool zero_code = (code & 7) == 0;
      const uint16_t sign = uint16_t((code & 8) << 12);
      const uint16_t ordinary = Ordinary(code, raw);
      const uint16_t folded = Folded(code, raw);
      SCOPED_TRACE(testing::Message() << "code " << code << " raw " << raw << " a " << a);
      // The kernel's value, exactly: e2m1 x 2^(a-15), 0 for a = 0, fp16 Inf when >= 65520.
      if (zero_code || a == 0) {
        ASSERT_EQ(ordinary, sign);   // +-0: -0 x 2^14 x (+0 scale) keeps the sign
      } else if ((code & 7) == 1) {  // 0.5 x 2^(a-15): subnormal for a = 1 (2^-15 = 0x0200)
        ASSERT_EQ(ordinary, a == 1 ? uint16_t(sign | 0x0200) : NormalF16(code, a - 15));
      } else if (std::ldexp(E2m1Halves(uint8_t(code & 7)) / 2.0, a - 15) >= 65520) {
        ASSERT_EQ(ordinary, uint16_t(sign | 0x7C00));
      } else {
        ASSERT_EQ(ordinary, NormalF16(code, a - 15));
      }
      // Folded.
      if (a >= 1 && a <= 16) {
        ASSERT_EQ(folded, ordinary);
      } else if (a == 0) {  // x/2 of the placed value: e2m1 x 2^-15, never 0 for a nonzero code
        ASSERT_EQ(double(f16_to_f32(folded)), std::ldexp(E2m1Halves(uint8_t(code)), -16));
        ASSERT_EQ(folded & 0x8000, sign);
      } else if (a == 17) {  // scale 0x7C00 = +Inf
        ASSERT_EQ(folded, zero_code ? kF16CanonicalNaN : uint16_t(sign | 0x7C00));
      } else {  // a >= 18: scale bits (a+14)<<10 overflow into bit 15: -2^(a-33), a = 18 is -0
        ASSERT_EQ(prepared_scale(Transform::kFolded, uint8_t(raw)), uint16_t(0x8000 | ((a - 18) << 10)));
        const double want = -std::ldexp(E2m1Halves(uint8_t(code)), a - 48);  // halves x 2^-15 x -2^(a-33)
        const float got = f16_to_f32(folded);
        const double rounded = std::nearbyint(want * std::ldexp(1.0, 24)) * std::ldexp(1.0, -24);
        ASSERT_EQ(double(got), a == 18 ? 0.0 : (std::fabs(want) >= std::ldexp(1.0, -14) ? want : rounded));
        ASSERT_NE(folded & 0x8000, sign);  // the sign flips, zeros included
      }
    }
  }
}

TEST(TransformTest, SeedCheckpointRange208Of208Equal) {
  int equal = 0;
  for (int raw = 114; raw <= 126; ++raw) {
    for (int code = 0; code < 16; ++code) equal += Folded(code, raw) == Ordinary(code, raw);
  }
  EXPECT_EQ(equal, 208);
}

TEST(TransformTest, FoldedDiffersInEveryOutOfRangeClass) {
  // a = 0 (raw 112): ordinary flushes; folded halves the placed value: 6 x 2^-14 / 2 = 1.5 x 2^-13.
  EXPECT_EQ(Ordinary(0x7, 112), 0x0000);
  EXPECT_EQ(Folded(0x7, 112), 0x0A00);
  EXPECT_EQ(Folded(0x1, 0), 0x0100);  // 0.5 x 2^-15 = 2^-16
  // a = 17 (raw 129): ordinary 6 x 2^2 = 24 (0x4E00); folded Inf, and NaN for a zero code.
  EXPECT_EQ(Ordinary(0x7, 129), 0x4E00);
  EXPECT_EQ(Folded(0x7, 129), 0x7C00);
  EXPECT_EQ(Folded(0xF, 129), 0xFC00);
  EXPECT_EQ(Folded(0x0, 129), kF16CanonicalNaN);
  // a = 18 (raw 130): folded scale is -0: 1.0 becomes -0.
  EXPECT_EQ(Ordinary(0x2, 130), 0x4800);  // 1 x 2^3 = 8
  EXPECT_EQ(Folded(0x2, 130), 0x8000);
  // a = 30 (raw 142): folded scale bits 0xB000 = -2^-3: 6 x 2^-14 x -2^-3 = -768 x 2^-24 (subnormal).
  EXPECT_EQ(Folded(0x7, 142), 0x8300);
  EXPECT_EQ(Ordinary(0x7, 142), 0x7C00);  // 6 x 2^15 overflows fp16
  EXPECT_EQ(Ordinary(0x7, 255), 0x7C00);  // NaN scale saturates: the NaN is dropped
  EXPECT_EQ(Ordinary(0x3, 255), 0x7A00);  // 1.5 x 2^15 = 49152
}

// The kernels' word-at-a-time form: every code byte at every byte position of the word, under
// every prepared scale byte of both transforms and under raw scale bits no layer prepares
// (NaN, Inf, subnormal, negative), element for element equal to dequantize.
TEST(TransformTest, DequantizeWordEqualsDequantizeForEveryCodeByteAndScale) {
  const std::vector<uint16_t> raw_scale_bits = {0x7C00, 0xFC00, 0x7C01, 0x7E00, 0xFFFF,
                                                0x0001, 0x8000, 0x3C00, 0x7BFF};
  for (Transform transform : {Transform::kOrdinary, Transform::kFolded}) {
    std::vector<uint16_t> scales = raw_scale_bits;
    for (int raw = 0; raw < 256; ++raw) scales.push_back(prepared_scale(transform, uint8_t(raw)));
    for (uint16_t scale : scales) {
      for (uint32_t byte = 0; byte < 256; ++byte) {
        // byte at position 0, and three other code bytes at positions 1..3 (each byte visits every position)
        const uint32_t word = byte | (((byte + 85) & 0xFF) << 8) | (((byte + 170) & 0xFF) << 16) |
                              (((byte + 255) & 0xFF) << 24);
        uint32_t pairs[4];
        dequantize_word(transform, word, scale, pairs);
        for (int k = 0; k < 8; ++k) {
          const uint8_t code = uint8_t((word >> (4 * k)) & 0xF);
          const uint16_t got = uint16_t(pairs[k / 2] >> (16 * (k % 2)));
          ASSERT_EQ(got, dequantize(transform, code, scale))
              << "transform " << int(transform) << " scale " << scale << " word " << word << " k " << k;
        }
      }
    }
  }
}

// The fast reference path looks up codes 0..7 and negates for 8..15 (gemm_fast_avx2.cc).
TEST(TransformTest, NegativeCodesAreNegatedPositiveCodes) {
  for (int raw = 0; raw < 256; ++raw) {
    for (int code = 0; code < 8; ++code) {
      for (Transform transform : {Transform::kOrdinary, Transform::kFolded}) {
        const uint16_t scale = prepared_scale(transform, uint8_t(raw));
        const uint16_t positive = dequantize(transform, uint8_t(code), scale);
        const uint16_t negative = dequantize(transform, uint8_t(code | 8), scale);
        if (f16_is_nan(positive)) {
          EXPECT_TRUE(f16_is_nan(negative)) << code << " " << raw;
        } else {
          EXPECT_EQ(negative, positive ^ 0x8000) << code << " " << raw;
        }
      }
    }
  }
}

TEST(AdmissionTest, DerivedSetIs113To128) {
  for (int raw = 0; raw < 256; ++raw) EXPECT_EQ(FoldAdmitted(uint8_t(raw)), raw >= 113 && raw <= 128) << raw;
}

TEST(AdmissionTest, LayerVerdictReportsOffendingBytesAndPositions) {
  std::vector<uint8_t> layer(1000, 120);
  EXPECT_TRUE(AdmitLayer(layer).admitted);
  EXPECT_EQ(AdmitLayer(layer).Describe(), "admitted");
  layer[17] = 112;
  layer[500] = 129;
  layer[999] = 255;
  const LayerAdmission verdict = AdmitLayer(layer, 2);
  EXPECT_FALSE(verdict.admitted);
  EXPECT_EQ(verdict.refused_count, 3u);
  ASSERT_EQ(verdict.refused.size(), 2u);  // max_reported
  EXPECT_EQ(verdict.refused[0].index, 17u);
  EXPECT_EQ(verdict.refused[0].raw, 112);
  EXPECT_EQ(verdict.refused[1].index, 500u);
  EXPECT_EQ(verdict.refused[1].raw, 129);
  EXPECT_NE(verdict.Describe().find("first raw 112 at index 17"), std::string::npos) << verdict.Describe();
  EXPECT_TRUE(AdmitLayer(std::vector<uint8_t>{113, 128}).admitted);
  EXPECT_FALSE(AdmitLayer(std::vector<uint8_t>{113, 128, 130}).admitted);
}

// AdmitLayer counts a contiguous admitted set by range, in blocks: its count is the table's on
// every byte value, on layers longer than a block, and where every byte is refused.
TEST(AdmissionTest, RefusedCountIsTheTablesOnEveryByteAndAcrossBlocks) {
  const std::array<bool, 256>& admitted = FoldAdmittedBytes();
  std::vector<uint8_t> layer(200003);
  for (size_t i = 0; i < layer.size(); ++i) layer[i] = uint8_t(i * 7 + i / 256);
  size_t refused = 0;
  for (uint8_t raw : layer) refused += admitted[raw] ? 0 : 1;
  EXPECT_EQ(AdmitLayer(layer).refused_count, refused);
  std::vector<uint8_t> all_refused(200003, 255);
  EXPECT_EQ(AdmitLayer(all_refused).refused_count, all_refused.size());
  for (int raw = 0; raw < 256; ++raw) {
    EXPECT_EQ(AdmitLayer(std::vector<uint8_t>(3, uint8_t(raw))).refused_count, admitted[raw] ? 0u : 3u) << raw;
  }
}

}  // namespace
}  // namespace mxdiff
