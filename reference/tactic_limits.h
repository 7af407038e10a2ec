// The limits of a tactic's fields that ValidateTactic enforces, shared with the fuzz case
// format. The raster swizzle never changes bits, so the reference accepts any stripe width
// (log2 up to kMaxSwizzleField); the kernels support fewer (kMaxSwizzleLog2 in
// kernels/tile_raster.h) and their dispatch decision rejects the rest.
#pragma once

namespace mxdiff {

inline constexpr int kMaxCtaK = 256;
inline constexpr int kMaxSplits = 256;
inline constexpr int kMaxSwizzleField = 30;

}  // namespace mxdiff
