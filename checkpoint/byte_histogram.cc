#include "checkpoint/byte_histogram.h"

#include <cstring>

namespace mxdiff::checkpoint {

void CountBytesScalar(std::span<const uint8_t> bytes, ScaleHistogram& histogram) {
  // Eight tables, so that a run of equal bytes does not wait on one counter's store each time.
  static constexpr int kTables = 8;
  uint64_t tables[kTables][256] = {};
  const uint8_t* p = bytes.data();
  size_t left = bytes.size();
  while (left >= kTables) {
    uint64_t word;
    std::memcpy(&word, p, sizeof word);
    for (int t = 0; t < kTables; ++t) ++tables[t][(word >> (8 * t)) & 0xFF];
    p += kTables;
    left -= kTables;
  }
  for (size_t i = 0; i < left; ++i) ++tables[0][p[i]];
  for (int raw = 0; raw < 256; ++raw) {
    uint64_t sum = 0;
    for (int t = 0; t < kTables; ++t) sum += tables[t][raw];
    histogram[raw] += sum;
  }
}

void CountBytes(std::span<const uint8_t> bytes, ScaleHistogram& histogram) {
  if (internal::CountBytesAvx2Supported()) {
    internal::CountBytesAvx2(bytes.data(), bytes.size(), histogram.data());
  } else {
    CountBytesScalar(bytes, histogram);
  }
}

}  // namespace mxdiff::checkpoint
