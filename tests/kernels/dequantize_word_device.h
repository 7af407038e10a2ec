// Runs reference/transform.h's dequantize_word on the device for every code byte at every byte
// position, every one of the 65536 scale bits and both transforms, against a table of
// dequantize computed on the host.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "reference/host_device.h"

namespace mxdiff::testing {

struct WordMismatches {
  uint64_t count = 0;
  // The first mismatch found (any one of them where count > 0): inputs, element, bits.
  int transform = 0;
  uint16_t scale_bits = 0;
  uint32_t word = 0;
  int k = 0;
  uint16_t got = 0;
  uint16_t want = 0;
};

// `expected[(transform * 65536 + scale_bits) * 16 + code]` holds dequantize's bits.
absl::StatusOr<WordMismatches> CompareDequantizeWordOnDevice(const std::vector<uint16_t>& expected);

// The word the test builds from `byte`: byte at position 0, byte + 85, + 170, + 255 above it, so
// that every code byte visits every position.
MXDIFF_HD uint32_t TestWord(uint32_t byte) {
  return byte | (((byte + 85) & 0xFF) << 8) | (((byte + 170) & 0xFF) << 16) | (((byte + 255) & 0xFF) << 24);
}

}  // namespace mxdiff::testing
