// The split-K reduction plan (docs/numerics.md: reduction order), shared by the reference and the kernels: for one
// output element the bits depend on this partition alone, so both compute it from here.
//
// K is cut into chunks of lcm(32, cta_k); the last chunk may be partial (K is a multiple of
// 32, not necessarily of the chunk). With S effective splits each split gets chunks / S
// chunks and the last (chunks % S) splits get one more. A request for more splits than there
// are chunks is clamped, so no split is ever empty.
#pragma once

#include "reference/host_device.h"

namespace mxdiff {

struct KRange {
  int begin;  // first k, inclusive
  int end;    // last k, exclusive
};

MXDIFF_HD int gcd_int(int a, int b) {
  while (b != 0) {
    const int t = a % b;
    a = b;
    b = t;
  }
  return a;
}

MXDIFF_HD int split_chunk_k(int cta_k) { return 32 / gcd_int(32, cta_k) * cta_k; }

MXDIFF_HD int split_chunk_count(int k, int cta_k) {
  const int chunk = split_chunk_k(cta_k);
  return (k + chunk - 1) / chunk;
}

MXDIFF_HD int effective_splits(int k, int cta_k, int requested_splits) {
  const int chunks = split_chunk_count(k, cta_k);
  return requested_splits < chunks ? requested_splits : chunks;
}

// The k range of split `split` (0 <= split < effective_splits(k, cta_k, requested)).
MXDIFF_HD KRange split_k_range(int k, int cta_k, int requested_splits, int split) {
  const int chunk = split_chunk_k(cta_k);
  const int chunks = split_chunk_count(k, cta_k);
  const int splits = effective_splits(k, cta_k, requested_splits);
  const int base = chunks / splits;
  const int first_long = splits - chunks % splits;  // splits from here on get base + 1
  const int begin_chunk = split * base + (split > first_long ? split - first_long : 0);
  const int end_chunk = begin_chunk + base + (split >= first_long ? 1 : 0);
  const int end = end_chunk * chunk;
  return KRange{begin_chunk * chunk, end < k ? end : k};
}

}  // namespace mxdiff
