#include "fuzz/checks/output_scan.h"

#include "kernels/output_poison.h"

namespace mxdiff::fuzz {

bool Unwritten(uint16_t bits) { return bits == kOutputPoison || bits == kRunnerOutputPoison; }

namespace {

// The first index where `found` holds, else `size`: each block of 256 is one vectorized pass,
// searched element by element only where it holds somewhere.
template <typename Found>
size_t FirstWhere(size_t size, const Found& found) {
  constexpr size_t kBlock = 256;
  for (size_t begin = 0; begin < size; begin += kBlock) {
    const size_t end = begin + kBlock < size ? begin + kBlock : size;
    bool any = false;
    for (size_t i = begin; i < end; ++i) any |= found(i);
    if (!any) continue;
    for (size_t i = begin; i < end; ++i) {
      if (found(i)) return i;
    }
  }
  return size;
}

}  // namespace

size_t FirstUnwritten(std::span<const uint16_t> output) {
  return FirstWhere(output.size(), [&](size_t i) { return Unwritten(output[i]); });
}

size_t FirstWrittenMismatch(std::span<const uint16_t> output, std::span<const uint16_t> reference) {
  return FirstWhere(output.size(), [&](size_t i) { return output[i] != reference[i] && !Unwritten(output[i]); });
}

}  // namespace mxdiff::fuzz
