// The value an MXFP4 element has by the OCP Microscaling spec, e2m1(code) x 2^(raw - 127) with
// raw 0xFF a NaN block, and where the kernels' contract (transform.h) deviates from it, so that
// reports can say "flushed to zero" or "NaN dropped" instead of printing two numbers.
#pragma once

#include <cstdint>
#include <string_view>

#include "reference/transform.h"

namespace mxdiff {

// value = significand x 2^exponent exactly (significand in -12..12, counting halves), unless nan.
struct MxSpecValue {
  bool nan = false;
  int significand = 0;
  int exponent = 0;
  bool negative_zero = false;  // code 0x8

  double ToDouble() const;  // exact: at most 4 significant bits, exponent within double range
};

// |e2m1| of codes 0..7 in halves (0, 0.5, 1, 1.5, 2, 3, 4, 6): the one E2M1 value table
// (docs/numerics.md: formats); codes 8..15 are the same values negated.
inline constexpr int kE2m1MagnitudeHalves[8] = {0, 1, 2, 3, 4, 6, 8, 12};

// e2m1 code value in halves: 0, 1, 2, 3, 4, 6, 8, 12 and their negatives (code 0x8 is -0).
int E2m1Halves(uint8_t code);
MxSpecValue MxSpecElement(uint8_t code, uint8_t raw);

enum class SpecDeviation : uint8_t {
  kNone = 0,           // the kernel's fp16 value equals the spec value
  kFlushedToZero = 1,  // spec nonzero, kernel 0 (ordinary, raw <= 112)
  kSaturated = 2,      // kernel smaller in magnitude: the adjusted exponent clamps at 30 (raw >= 143)
  kOverflowToInf = 3,  // kernel Inf where the spec value is finite (fp16 range, folded a = 17)
  kNaNDropped = 4,     // spec NaN (raw 0xFF), kernel not NaN
  kSpuriousNaN = 5,    // kernel NaN where the spec value is a number (folded a = 17 with a zero code)
  kSignSpill = 6,      // kernel sign differs from the spec's (folded a >= 18: exponent in the sign bit)
  kEnlarged = 7,       // kernel larger in magnitude (folded a = 0 halves instead of flushing)
};
inline constexpr int kSpecDeviationCount = 8;

std::string_view SpecDeviationName(SpecDeviation deviation);  // "none", "flushed-to-zero", ...

// How dequantize(transform, code, prepared_scale(transform, raw)) relates to the spec value.
SpecDeviation ClassifyAgainstSpec(Transform transform, uint8_t code, uint8_t raw);

}  // namespace mxdiff
