// The per-model step functions behind Step() and ReduceAdd() (step_model.h): one
// file per model, each calling the shared host/device definition in step_model_hd.h. Internal
// to the reference library.
#pragma once

#include <cstdint>

#include "reference/step_model_hd.h"

namespace mxdiff::internal {

using StepInputs = const uint16_t*;  // four fp16 bit patterns

uint32_t StepV100(uint32_t c, StepInputs a, StepInputs b);     // step_model_v100.cc
uint32_t StepSm90(uint32_t c, StepInputs a, StepInputs b);     // step_model_sm90.cc
uint32_t StepSm90Ftz(uint32_t c, StepInputs a, StepInputs b);  // step_model_sm90.cc
uint32_t StepExact(uint32_t c, StepInputs a, StepInputs b);    // step_model_exact.cc
uint32_t AddF32Rne(uint32_t x, uint32_t y);                    // step_model_sm90.cc
uint32_t AddF32RneFtz(uint32_t x, uint32_t y);                 // step_model_sm90.cc

// step_model_hd.h: fp32 subnormal to a zero of its sign (FTZ); NaN to 0x7FFFFFFF.
using hd::CanonicalF32;
using hd::FlushSubnormalF32;

}  // namespace mxdiff::internal
