#include "reference/split_plan.h"

#include <numeric>
#include <vector>

#include "gtest/gtest.h"

namespace mxdiff {
namespace {

TEST(SplitPlanTest, ChunkIsLcmOf32AndCtaK) {
  EXPECT_EQ(split_chunk_k(32), 32);
  EXPECT_EQ(split_chunk_k(64), 64);
  EXPECT_EQ(split_chunk_k(16), 32);
  EXPECT_EQ(split_chunk_k(4), 32);
  EXPECT_EQ(split_chunk_k(48), 96);
  EXPECT_EQ(split_chunk_k(40), 160);
  EXPECT_EQ(split_chunk_k(256), 256);
}

TEST(SplitPlanTest, RemainderGoesToTheLastSplits) {
  // K = 320, chunk 32: 10 chunks over 4 splits -> 2, 2, 3, 3.
  const int want[4][2] = {{0, 64}, {64, 128}, {128, 224}, {224, 320}};
  ASSERT_EQ(effective_splits(320, 32, 4), 4);
  for (int s = 0; s < 4; ++s) {
    const KRange range = split_k_range(320, 32, 4, s);
    EXPECT_EQ(range.begin, want[s][0]) << s;
    EXPECT_EQ(range.end, want[s][1]) << s;
  }
  // A partial last chunk: K = 96, CTA_K = 64 -> chunk 64, chunks 2 (the second holds 32 k).
  EXPECT_EQ(split_k_range(96, 64, 2, 1).begin, 64);
  EXPECT_EQ(split_k_range(96, 64, 2, 1).end, 96);
  // More splits than chunks are clamped.
  EXPECT_EQ(effective_splits(64, 32, 5), 2);
}

// Every k of [0, K) belongs to exactly one split; splits ascend, are contiguous, nonempty, start
// on chunk boundaries, hold floor or ceil of chunks / S chunks, the longer ones last.
TEST(SplitPlanTest, EveryKCoveredExactlyOnceForManyPlans) {
  int plans = 0;
  for (int k = 32; k <= 2048; k += 32) {
    for (int cta_k = 4; cta_k <= 256; cta_k += 4) {
      const int chunk = split_chunk_k(cta_k);
      ASSERT_EQ(chunk % 32, 0);
      ASSERT_EQ(chunk % cta_k, 0);
      ASSERT_EQ(std::lcm(32, cta_k), chunk);
      const int chunks = split_chunk_count(k, cta_k);
      for (int requested : {1, 2, 3, 4, 5, 7, 8, 13, 16, 64, 256}) {
        const int splits = effective_splits(k, cta_k, requested);
        ASSERT_EQ(splits, std::min(requested, chunks));
        std::vector<int> owner(k, -1);
        int previous_end = 0;
        int previous_chunks = 0;
        for (int s = 0; s < splits; ++s) {
          const KRange range = split_k_range(k, cta_k, requested, s);
          ASSERT_EQ(range.begin, previous_end) << k << " " << cta_k << " " << requested << " " << s;
          ASSERT_LT(range.begin, range.end);
          ASSERT_EQ(range.begin % chunk, 0);
          ASSERT_EQ(range.begin % 4, 0);
          ASSERT_EQ(range.end % 4, 0);
          const int range_chunks = (range.end - range.begin + chunk - 1) / chunk;
          ASSERT_TRUE(range_chunks == chunks / splits || range_chunks == chunks / splits + 1);
          ASSERT_GE(range_chunks, previous_chunks);  // longer splits come last
          previous_chunks = range_chunks;
          for (int kk = range.begin; kk < range.end; ++kk) {
            ASSERT_EQ(owner[kk], -1);
            owner[kk] = s;
          }
          previous_end = range.end;
        }
        ASSERT_EQ(previous_end, k);
        for (int kk = 0; kk < k; ++kk) ASSERT_NE(owner[kk], -1);
        ++plans;
      }
    }
  }
  EXPECT_EQ(plans, 64 * 64 * 11);
}

}  // namespace
}  // namespace mxdiff
