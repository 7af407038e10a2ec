#include "reference/mx_spec.h"

#include <cmath>

#include "reference/fp16.h"

namespace mxdiff {

int E2m1Halves(uint8_t code) {
  const int magnitude = kE2m1MagnitudeHalves[code & 0x7];
  return (code & 0x8) ? -magnitude : magnitude;
}

MxSpecValue MxSpecElement(uint8_t code, uint8_t raw) {
  MxSpecValue value;
  if (raw == 0xFF) {
    value.nan = true;
    return value;
  }
  value.significand = E2m1Halves(code);
  value.exponent = int(raw) - 127 - 1;  // halves
  value.negative_zero = (code & 0xF) == 0x8;
  return value;
}

double MxSpecValue::ToDouble() const {
  if (nan) return std::nan("");
  if (significand == 0) return negative_zero ? -0.0 : 0.0;
  return std::ldexp(double(significand), exponent);
}

std::string_view SpecDeviationName(SpecDeviation deviation) {
  switch (deviation) {
    case SpecDeviation::kNone:
      return "none";
    case SpecDeviation::kFlushedToZero:
      return "flushed-to-zero";
    case SpecDeviation::kSaturated:
      return "saturated";
    case SpecDeviation::kOverflowToInf:
      return "overflow-to-inf";
    case SpecDeviation::kNaNDropped:
      return "nan-dropped";
    case SpecDeviation::kSpuriousNaN:
      return "spurious-nan";
    case SpecDeviation::kSignSpill:
      return "sign-spill";
    case SpecDeviation::kEnlarged:
      return "enlarged";
  }
  return "unknown";
}

SpecDeviation ClassifyAgainstSpec(Transform transform, uint8_t code, uint8_t raw) {
  const uint16_t kernel_bits = dequantize(transform, code, prepared_scale(transform, raw));
  const MxSpecValue spec = MxSpecElement(code, raw);
  const bool kernel_nan = f16_is_nan(kernel_bits);
  if (spec.nan) return kernel_nan ? SpecDeviation::kNone : SpecDeviation::kNaNDropped;
  if (kernel_nan) return SpecDeviation::kSpuriousNaN;
  const double kernel = double(f16_to_f32(kernel_bits));  // fp16 values are exact doubles
  const double exact = spec.ToDouble();
  if (kernel == exact) return SpecDeviation::kNone;  // -0 equals +0: both are zero
  if (std::isinf(kernel)) return SpecDeviation::kOverflowToInf;
  if (kernel == 0.0) return SpecDeviation::kFlushedToZero;
  if (exact != 0.0 && std::signbit(kernel) != std::signbit(exact)) return SpecDeviation::kSignSpill;
  return std::fabs(kernel) < std::fabs(exact) ? SpecDeviation::kSaturated : SpecDeviation::kEnlarged;
}

}  // namespace mxdiff
