// The classes of a UE8M0 scale byte under the two transforms (docs/numerics.md, transforms): the
// one home of this classification for signatures, coverage counters, case descriptions and
// generators. Admitted means exactly FoldAdmitted (derived, never a typed-in range); the other
// classes say how the folded transform goes wrong there.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace mxdiff {

// In order of how unusual a column holding such a byte is (kFlushed first).
enum class ScaleClass : uint8_t {
  kFlushed = 0,    // a = 0: ordinary flushes the block to zero, folded halves it
  kSaturated = 1,  // a = 30: ordinary saturates at 2^15 (the NaN byte 0xFF lands here too)
  kSignSpill = 2,  // a = 18..29: the folded exponent spills into the fp16 sign bit
  kFoldedInf = 3,  // a = 17: the folded scale is Inf
  kAdmitted = 4,   // folded equals ordinary for all 16 codes
};
inline constexpr int kScaleClassCount = 5;

ScaleClass ClassifyScale(uint8_t raw);
// "a=0", "a=30", "a=18..29", "a=17", "admitted": file-name safe, used in finding signatures.
std::string_view ScaleClassName(ScaleClass scale_class);
// The smallest and largest raw byte of each class (each class is one contiguous range).
struct RawRange {
  uint8_t first = 0;
  uint8_t last = 0;
};
RawRange ScaleClassRange(ScaleClass scale_class);

}  // namespace mxdiff
