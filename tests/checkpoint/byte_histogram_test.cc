// CountBytes (the AVX2 path where the CPU has it) against the definition, CountBytesScalar,
// and against the reference's HistogramOf, on narrow and wide ranges, every block boundary
// shape, unaligned starts, long runs of one value and the edges 0 and 255.
#include <random>

#include "gtest/gtest.h"
#include "reference/admission.h"
#include "reference/checkpoint_scales.h"
#include "checkpoint/byte_histogram.h"
#include "tests/reference/test_seed.h"

namespace mxdiff::checkpoint {
namespace {

void ExpectSameCounts(std::span<const uint8_t> bytes, const std::string& what) {
  ScaleHistogram fast{}, scalar{};
  CountBytes(bytes, fast);
  CountBytesScalar(bytes, scalar);
  ASSERT_EQ(scalar, HistogramOf(bytes)) << what;
  ASSERT_EQ(fast, scalar) << what;
}

TEST(ByteHistogram, EqualsTheDefinitionOnEveryRangeAndSize) {
  std::printf("CountBytes takes the %s path on this CPU\n", internal::CountBytesAvx2Supported() ? "AVX2" : "scalar");
  std::mt19937_64 rng(testing::TestSeed());
  const std::vector<size_t> sizes = {0, 1, 7, 31, 32, 33, 63, 64, 255, 8159, 8160, 8161, 8192, 16320, 16321, 50000};
  for (int lo = 0; lo < 256; lo += 3) {
    for (int width : {1, 2, 7, 8, 9, 15, 16, 17, 40, 256}) {
      for (size_t size : sizes) {
        std::vector<uint8_t> bytes(size + 3);
        for (uint8_t& b : bytes) b = uint8_t(std::min(255, lo + int(rng() % unsigned(width))));
        const size_t start = rng() % 4;  // unaligned starts
        ExpectSameCounts(std::span<const uint8_t>(bytes).subspan(start, size),
                         "lo " + std::to_string(lo) + " width " + std::to_string(width) + " size " + std::to_string(size));
      }
    }
  }
}

TEST(ByteHistogram, LongRunsOfOneValueAndMixedBlocks) {
  std::mt19937_64 rng(testing::TestSeed());
  for (int value : {0, 1, 112, 120, 127, 128, 254, 255}) {
    ExpectSameCounts(std::vector<uint8_t>(3 * 8160 + 77, uint8_t(value)), "run of " + std::to_string(value));
  }
  // Narrow blocks next to wide ones (the scalar tables accumulate across blocks).
  std::vector<uint8_t> bytes(1 << 20);
  for (size_t i = 0; i < bytes.size(); ++i) {
    const bool wide = (i / 8160) % 3 == 1;
    bytes[i] = wide ? uint8_t(rng()) : CheckpointScaleOf(rng());
  }
  ExpectSameCounts(bytes, "mixed blocks");
}

}  // namespace
}  // namespace mxdiff::checkpoint
