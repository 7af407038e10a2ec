// Checks of the rules the kernels and the reference share, against computations that share no
// code with them (fuzz_reference runs these on every case):
//  - the hardware-recorded vectors (tests/vectors/, compiled in): one row per case, picked by a
//    hash of the case, through the step model the recording names;
//  - the fp16 helpers of reference/fp16.h against the CPU's own conversions (F16C), on the
//    case's fp16 values and on values built from them in the rare classes: exact ties of fp16
//    rounding (normal and subnormal), fp32 subnormals, signed zeros, the overflow edge;
//  - the sm90-emulated step models against a chain of the C library's fmaf, with fp32
//    subnormal accumulators and -0 products in the mix.
#pragma once

#include "fuzz/formats/case_format.h"
#include "fuzz/driver/findings.h"

namespace mxdiff::fuzz {

CheckResult CheckAgainstIndependentArithmetic(const FuzzCase& fuzz_case);

// Rows of the compiled-in recordings (0 if none was compiled in: a build error, see CMake).
size_t RecordedVectorRows();

}  // namespace mxdiff::fuzz
