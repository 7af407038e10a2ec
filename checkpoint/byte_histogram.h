// Counting the values of scale bytes: the audit's inner loop. CountBytesScalar is the
// definition; CountBytes takes the AVX2 path where the CPU has it (byte_histogram_avx2.cc),
// which tests and the fuzz target check against the definition on every input they make.
#pragma once

#include <cstdint>
#include <span>

#include "reference/admission.h"

namespace mxdiff::checkpoint {

// Adds the count of each byte value of `bytes` to `histogram`.
void CountBytes(std::span<const uint8_t> bytes, ScaleHistogram& histogram);
void CountBytesScalar(std::span<const uint8_t> bytes, ScaleHistogram& histogram);

namespace internal {
bool CountBytesAvx2Supported();
void CountBytesAvx2(const uint8_t* bytes, size_t size, uint64_t* histogram);  // only if supported
}  // namespace internal

}  // namespace mxdiff::checkpoint
