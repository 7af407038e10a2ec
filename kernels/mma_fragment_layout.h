// The m8n8k4 fragment layout the kernels assume (PTX ISA; docs/numerics.md: one m8n8k4 step), in one place for the
// kernel, the calibration probe that re-derives it on the device, and the tests. A warp holds
// four independent 8x8x4 products, one per quad-pair q = (lane % 16) / 4.
#pragma once

#include "reference/host_device.h"

namespace mxdiff {

MXDIFF_HD int QuadPair(int lane) { return (lane & 15) >> 2; }
// The row of A (and the column of B) whose four k elements `lane` holds; register i is k = i.
MXDIFF_HD int FragmentIndex(int lane) { return (lane & 3) + 4 * (lane >= 16); }
// Where accumulator register i (0..7) of `lane` sits in its quad-pair's 8x8 tile.
MXDIFF_HD int AccumulatorRow(int lane, int i) { return (lane & 1) + (i & 2) + 4 * (lane >= 16); }
MXDIFF_HD int AccumulatorColumn(int lane, int i) { return (i & 4) + (lane & 2) + (i & 1); }

}  // namespace mxdiff
