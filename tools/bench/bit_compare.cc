#include "tools/bench/bit_compare.h"

#include "fmt/format.h"

namespace mxdiff::bench {

std::string DescribeUnwritten(std::span<const uint16_t> output, int n) {
  size_t count = 0;
  size_t first = 0;
  for (size_t i = 0; i < output.size(); ++i) {
    if (output[i] != kRunnerOutputPoison) continue;
    if (count++ == 0) first = i;
  }
  if (count == 0) return "";
  return fmt::format("{} of {} elements unwritten (still 0x{:04x}), first at row {} col {}", count, output.size(),
                     kRunnerOutputPoison, first / size_t(n), first % size_t(n));
}

std::string DescribeBitDifference(std::span<const uint16_t> a, std::span<const uint16_t> b, int n) {
  if (a.size() != b.size()) return fmt::format("sizes differ: {} vs {} elements", a.size(), b.size());
  size_t count = 0;
  std::string first;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) continue;
    if (++count <= 3) {
      first += fmt::format("; row {} col {}: {:04x} vs {:04x}", i / size_t(n), i % size_t(n), a[i], b[i]);
    }
  }
  if (count == 0) return "";
  return fmt::format("{} of {} elements differ{}", count, a.size(), first);
}

}  // namespace mxdiff::bench
