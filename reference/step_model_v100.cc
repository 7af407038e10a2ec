// The V100 tensor core (HMMA.884, fp16 x fp16 + fp32 -> fp32), after Fasi, Higham, Mikaitis and
// Pranesh (PeerJ CS 2021) and the hardware-validated model of Khattak and Mikaitis
// (arXiv:2512.07004, MATLAB-tensor-core `Generic_BFMA_TC.m` with V100 parameters: no extra
// alignment bits, final rounding toward zero, no sticky bit):
//   1. products are exact; zero products are skipped;
//   2. each product's exponent is the sum of its fp16 factors' exponents, ea + eb, with a
//      subnormal factor counted at exponent -14 (its significand is then below 1); c counts
//      at its fp32 exponent (-126 for a subnormal);
//   3. every term is truncated toward zero to a multiple of 2^(E - 23), E the largest of those
//      exponents (a product whose significand reaches [2, 4) keeps one bit more than
//      "23 bits below its own leading bit": the published model's extra alignment bit);
//   4. the truncated terms are summed exactly and the sum truncated toward zero to fp32.
// Measured on tests/vectors/v100_hmma884_f32.csv: 2500 of 2500 rows match.
//
// Decisions where the recorded vectors say nothing (as the published model does):
//   - NaN in, or Inf x 0: NaN (canonical 0x7FFFFFFF); +Inf and -Inf terms together: NaN;
//     otherwise an Inf term gives that Inf.
//   - A truncated sum at or above 2^128 would give Inf of its sign (the published model encodes
//     the overflowed exponent as Inf). One step cannot get there: |c| <= 2^128 - 2^104, four
//     products add less than 2^35, and truncation toward zero keeps the sum finite.
//   - An exact zero sum is +0 (the sum is a signed integer: it has no -0), including
//     c = -0 with all products zero.
//   - With every product zero the result is c itself (subnormal c kept).
//   - Subnormal results cannot arise once a product is nonzero (the grid is at least 2^-51).
#include <algorithm>
#include <bit>
#include <climits>
#include <cstdlib>

#include "reference/fp16.h"
#include "reference/step_model_internal.h"

namespace mxdiff::internal {
namespace {

struct Term {
  uint64_t significand;  // integer
  int lsb_exponent;      // the term is significand x 2^lsb_exponent
  bool negative;
};

// Special values; returns true and sets `result` when one decides the step.
bool SpecialValueResult(uint32_t c, StepInputs a, StepInputs b, uint32_t& result) {
  bool nan = f32_is_nan(c);
  bool positive_inf = c == 0x7F800000;
  bool negative_inf = c == 0xFF800000;
  for (int i = 0; i < 4; ++i) {
    const bool a_inf = (a[i] & 0x7FFF) == 0x7C00;
    const bool b_inf = (b[i] & 0x7FFF) == 0x7C00;
    nan |= f16_is_nan(a[i]) || f16_is_nan(b[i]) || (a_inf && (b[i] & 0x7FFF) == 0) ||
           (b_inf && (a[i] & 0x7FFF) == 0);
    if (a_inf || b_inf) (((a[i] ^ b[i]) & 0x8000) != 0 ? negative_inf : positive_inf) = true;
  }
  if (nan || (positive_inf && negative_inf)) {
    result = kF32CanonicalNaN;
  } else if (positive_inf || negative_inf) {
    result = positive_inf ? 0x7F800000u : 0xFF800000u;
  } else {
    return false;
  }
  return true;
}

// Significand (integer, implicit bit included) and the exponent the alignment uses.
void SplitF16(uint16_t h, uint64_t& significand, int& exponent) {
  const int field = (h >> 10) & 0x1F;
  significand = (h & 0x3FF) | (field != 0 ? 0x400u : 0u);
  exponent = std::max(field, 1) - 15;  // the significand has 10 fractional bits
}

}  // namespace

uint32_t StepV100(uint32_t c, StepInputs a, StepInputs b) {
  uint32_t special;
  if (SpecialValueResult(c, a, b, special)) return special;

  Term terms[5];
  int count = 0;
  int largest_exponent = INT_MIN;
  for (int i = 0; i < 4; ++i) {
    if ((a[i] & 0x7FFF) == 0 || (b[i] & 0x7FFF) == 0) continue;
    uint64_t sa, sb;
    int ea, eb;
    SplitF16(a[i], sa, ea);
    SplitF16(b[i], sb, eb);
    terms[count++] = Term{sa * sb, ea + eb - 20, ((a[i] ^ b[i]) & 0x8000) != 0};
    largest_exponent = std::max(largest_exponent, ea + eb);
  }
  if (count == 0) return (c & 0x7FFFFFFF) == 0 ? 0u : c;
  if ((c & 0x7FFFFFFF) != 0) {
    const int field = int(c >> 23) & 0xFF;
    const int exponent = std::max(field, 1) - 127;
    terms[count++] = Term{(c & 0x7FFFFF) | (field != 0 ? 0x800000u : 0u), exponent - 23, (c >> 31) != 0};
    largest_exponent = std::max(largest_exponent, exponent);
  }

  // Truncate each term toward zero onto the grid 2^grid and sum exactly (|sum| < 2^28).
  const int grid = largest_exponent - 23;
  int64_t sum = 0;
  for (int i = 0; i < count; ++i) {
    const int shift = terms[i].lsb_exponent - grid;
    const uint64_t aligned =
        shift >= 0 ? terms[i].significand << shift : (-shift >= 64 ? 0 : terms[i].significand >> -shift);
    sum += terms[i].negative ? -int64_t(aligned) : int64_t(aligned);
  }
  if (sum == 0) return 0;

  // Truncate |sum| x 2^grid toward zero to fp32.
  const uint32_t sign = sum < 0 ? 0x80000000u : 0u;
  const uint64_t magnitude = uint64_t(std::llabs(sum));
  const int top = 63 - std::countl_zero(magnitude);
  const int lsb = std::max(grid + top - 23, -149);  // the result's unit in the last place
  const uint64_t kept = lsb >= grid ? magnitude >> (lsb - grid) : magnitude << (grid - lsb);
  // kept < 2^24 holds the implicit bit, which carries into the exponent field.
  const int64_t bits = (int64_t(lsb + 149) << 23) + int64_t(kept);
  if (bits >= 0x7F800000) return sign | 0x7F800000;
  return sign | uint32_t(bits);
}

}  // namespace mxdiff::internal
