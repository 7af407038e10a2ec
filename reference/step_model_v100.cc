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
#include "reference/step_model_internal.h"

namespace mxdiff::internal {

// The arithmetic is step_model_hd.h's (shared with the device reference).
uint32_t StepV100(uint32_t c, StepInputs a, StepInputs b) { return hd::StepV100(c, a, b); }

}  // namespace mxdiff::internal
