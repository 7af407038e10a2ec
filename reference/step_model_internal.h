// The per-model step functions behind Step() and ReduceAdd() (step_model.h): one
// implementation file per model. Internal to the reference library.
#pragma once

#include <cstdint>

namespace mxdiff::internal {

using StepInputs = const uint16_t*;  // four fp16 bit patterns

uint32_t StepV100(uint32_t c, StepInputs a, StepInputs b);     // step_model_v100.cc
uint32_t StepSm90(uint32_t c, StepInputs a, StepInputs b);     // step_model_sm90.cc
uint32_t StepSm90Ftz(uint32_t c, StepInputs a, StepInputs b);  // step_model_sm90.cc
uint32_t StepExact(uint32_t c, StepInputs a, StepInputs b);    // step_model_exact.cc
uint32_t AddF32Rne(uint32_t x, uint32_t y);                    // step_model_sm90.cc
uint32_t AddF32RneFtz(uint32_t x, uint32_t y);                 // step_model_sm90.cc

// fp32 subnormal to sign-preserved zero, as the GPU's FTZ mode does to inputs and results.
inline uint32_t FlushSubnormalF32(uint32_t bits) {
  return (bits & 0x7F800000) == 0 ? (bits & 0x80000000) : bits;
}

inline uint32_t CanonicalF32(uint32_t bits) {
  return (bits & 0x7F800000) == 0x7F800000 && (bits & 0x007FFFFF) != 0 ? 0x7FFFFFFFu : bits;
}

}  // namespace mxdiff::internal
