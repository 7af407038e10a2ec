// fuzz_reference's properties, on small random problems:
//  - the split plan covers every k exactly once, in ascending contiguous ranges, shorter
//    splits first (docs/numerics.md: reduction order);
//  - the reference's fp32 output equals an element-by-element recomputation from the public
//    pieces (Step, ReduceAdd, split_k_range): the stacked oracle, which catches a reduction
//    order or a k range the optimized reference gets wrong; its trace agrees too;
//  - the fast (vectorized) reference path gives the scalar path's bits;
//  - the case's arithmetic model stays within a proven error bound of the `exact` model;
//  - two tactics with the same split partition give identical bits;
//  - the shared rules against independent arithmetic (fuzz/checks/independent_checks.h).
#pragma once

#include <string_view>
#include <vector>

#include "fuzz/formats/case_format.h"
#include "fuzz/driver/findings.h"
#include "reference/error_bound.h"

namespace mxdiff::fuzz {

// The checks, each its own function, in the order they run: independent-arithmetic, plan,
// reference-run (the reference refused a valid case), then on its output fast-vs-scalar,
// recompute (with the trace), exact-bound and partition-bits. Every finding is kept.
std::vector<std::string_view> ReferenceCheckNames();
std::vector<Finding> ReferenceFindings(const FuzzCase& fuzz_case);
// The first of ReferenceFindings.
CheckResult CheckReferenceCase(const FuzzCase& fuzz_case);

// The transform fuzz_reference and fuzz_gemm's CPU side run for a case: folded only on an
// explicit folded request (the reference computes folded on any layer, refused ones included).
Transform ReferenceTransform(const FuzzCase& fuzz_case);

// ModelErrorBound: reference/error_bound.h (shared with the Python package's bound mode).
using mxdiff::ModelErrorBound;

}  // namespace mxdiff::fuzz
