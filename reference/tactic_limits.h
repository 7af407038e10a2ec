// The limits of a tactic's fields that ValidateTactic enforces, shared with the fuzz case
// format. The raster swizzle never changes bits, so the reference accepts any stripe width
// (log2 up to kMaxSwizzleField); the kernels support fewer (kMaxSwizzleLog2 in
// kernels/tile_raster.h) and their dispatch decision rejects the rest.
#pragma once

namespace mxdiff {

inline constexpr int kMaxCtaK = 256;
inline constexpr int kMaxSplits = 256;
inline constexpr int kMaxSwizzleField = 30;

// The raster swizzle after `swizzle` among 0..widest, wrapping to 0 (widest >= 0): the same CTAs
// in another order, which never changes bits. The one "next swizzle" rule of the checks that
// rerun a tactic reordered: the kernel modules with their registry's widest, fuzz_reference with
// the case format's kMaxSwizzle.
constexpr int NextSwizzle(int swizzle, int widest) { return (swizzle + 1) % (widest + 1); }

}  // namespace mxdiff
