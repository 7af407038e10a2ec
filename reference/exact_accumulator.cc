#include "reference/exact_accumulator.h"

#include <cmath>

namespace mxdiff {

double ExactAccumulator::ToDouble() const {
  const bool negative = IsNegative();
  uint64_t magnitude[kLimbs];
  Magnitude(magnitude);
  const int top = TopBit(magnitude);
  if (top < 0) return 0.0;
  const int begin = top >= 63 ? top - 63 : 0;
  const double value = std::ldexp(double(Extract64(magnitude, begin)), begin + kLsbExponent);
  return negative ? -value : value;
}

}  // namespace mxdiff
