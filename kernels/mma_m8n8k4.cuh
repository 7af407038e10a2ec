// The one matrix instruction the kernels and the calibration probe use: four independent
// 8x8x4 fp16 products with fp32 accumulate per warp (docs/numerics.md: one m8n8k4 step has the fragment layout).
#pragma once

#include <cstdint>

#include "kernels/mma_fragment_layout.h"

namespace mxdiff {

// a01/a23: this lane's A elements 0..3 (low half first); b01/b23 likewise; d accumulates in place.
__device__ __forceinline__ void MmaM8N8K4(float (&d)[8], uint32_t a01, uint32_t a23, uint32_t b01,
                                          uint32_t b23) {
  asm volatile(
      "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32 "
      "{%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9}, {%10,%11}, {%0,%1,%2,%3,%4,%5,%6,%7};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "r"(a01), "r"(a23), "r"(b01), "r"(b23));
}

}  // namespace mxdiff
