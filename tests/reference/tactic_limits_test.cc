#include "reference/tactic_limits.h"

#include <set>

#include "gtest/gtest.h"

namespace mxdiff {
namespace {

// NextSwizzle: the next of 0..widest, wrapping; widest + 1 steps visit every swizzle once and
// come back; never the same swizzle where there is another.
TEST(TacticLimitsTest, NextSwizzleCyclesThroughZeroToWidest) {
  EXPECT_EQ(NextSwizzle(0, 0), 0);
  EXPECT_EQ(NextSwizzle(3, 4), 4);
  EXPECT_EQ(NextSwizzle(4, 4), 0);
  EXPECT_EQ(NextSwizzle(6, 7), 7);
  EXPECT_EQ(NextSwizzle(7, 7), 0);
  for (int widest = 0; widest <= kMaxSwizzleField; ++widest) {
    for (int start = 0; start <= widest; ++start) {
      std::set<int> seen;
      int s = start;
      for (int step = 0; step <= widest; ++step) {
        const int next = NextSwizzle(s, widest);
        ASSERT_GE(next, 0);
        ASSERT_LE(next, widest);
        if (widest > 0) ASSERT_NE(next, s) << "widest " << widest;
        seen.insert(next);
        s = next;
      }
      EXPECT_EQ(s, start) << "widest " << widest;
      EXPECT_EQ(int(seen.size()), widest + 1) << "widest " << widest;
    }
  }
}

}  // namespace
}  // namespace mxdiff
