// The differential's output scans (fuzz/checks/output_scan.h): the first unwritten element and the
// first written mismatch, wherever they fall against the scans' blocks, both poisons, and a
// poisoned element that differs from the reference (unwritten, so not a mismatch).
#include "fuzz/checks/output_scan.h"

#include <vector>

#include "gtest/gtest.h"
#include "kernels/output_poison.h"

namespace mxdiff::fuzz {
namespace {

TEST(OutputScan, FindsTheFirstUnwrittenAndTheFirstWrittenMismatchAnywhere) {
  for (size_t size : {size_t(0), size_t(1), size_t(255), size_t(256), size_t(257), size_t(1000)}) {
    const std::vector<uint16_t> reference(size, 0x3C00);
    EXPECT_EQ(FirstUnwritten(reference), size);
    EXPECT_EQ(FirstWrittenMismatch(reference, reference), size);
    for (size_t at = 0; at < size; at += 37) {
      for (uint16_t poison : {kOutputPoison, kRunnerOutputPoison}) {
        std::vector<uint16_t> output = reference;
        output[at] = poison;
        EXPECT_EQ(FirstUnwritten(output), at) << size << " " << at;
        EXPECT_EQ(FirstWrittenMismatch(output, reference), size) << "unwritten is not a mismatch: " << at;
        if (at + 1 < size) {
          output[size - 1] = 0x3C01;  // a written mismatch after the poison
          EXPECT_EQ(FirstWrittenMismatch(output, reference), size - 1) << size << " " << at;
          EXPECT_EQ(FirstUnwritten(output), at);
        }
      }
      std::vector<uint16_t> output = reference;
      output[at] = 0x8000;  // other bits (-0)
      if (at + 5 < size) output[at + 5] = 0x7FFF;
      EXPECT_EQ(FirstWrittenMismatch(output, reference), at) << size << " " << at;
    }
  }
}

}  // namespace
}  // namespace mxdiff::fuzz
