#include "fuzz/checks/output_scan.h"

#include "kernels/output_poison.h"

namespace mxdiff::fuzz {

bool Unwritten(uint16_t bits) { return bits == kOutputPoison || bits == kRunnerOutputPoison; }

size_t FirstUnwritten(std::span<const uint16_t> output) {
  constexpr size_t kBlock = 256;  // a block without a poison is one vectorized pass
  for (size_t begin = 0; begin < output.size(); begin += kBlock) {
    const size_t end = begin + kBlock < output.size() ? begin + kBlock : output.size();
    bool any = false;
    for (size_t i = begin; i < end; ++i) any |= Unwritten(output[i]);
    if (!any) continue;
    for (size_t i = begin; i < end; ++i) {
      if (Unwritten(output[i])) return i;
    }
  }
  return output.size();
}

size_t FirstWrittenMismatch(std::span<const uint16_t> output, std::span<const uint16_t> reference) {
  constexpr size_t kBlock = 256;
  for (size_t begin = 0; begin < output.size(); begin += kBlock) {
    const size_t end = begin + kBlock < output.size() ? begin + kBlock : output.size();
    bool any = false;
    for (size_t i = begin; i < end; ++i) any |= output[i] != reference[i] && !Unwritten(output[i]);
    if (!any) continue;
    for (size_t i = begin; i < end; ++i) {
      if (output[i] != reference[i] && !Unwritten(output[i])) return i;
    }
  }
  return output.size();
}

}  // namespace mxdiff::fuzz
