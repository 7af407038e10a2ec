// The device's dequantize_word (two fp16 multiplies per instruction) against the host's
// dequantize, exhaustively: 256 code bytes x 4 positions x 65536 scale bits x 2 transforms.
#include <cuda_runtime.h>

#include <vector>

#include "gtest/gtest.h"
#include "reference/transform.h"
#include "tests/kernels/dequantize_word_device.h"

namespace mxdiff::testing {
namespace {

TEST(DequantizeWordTest, DeviceEqualsHostDequantizeForEveryCodeByteAndScaleBits) {
  int devices = 0;
  const cudaError_t error = cudaGetDeviceCount(&devices);
  if (error != cudaSuccess || devices == 0) {
    GTEST_SKIP() << "no CUDA device: " << (error != cudaSuccess ? cudaGetErrorString(error) : "none found");
  }
  std::vector<uint16_t> expected(size_t(2) * 65536 * 16);
  for (int transform = 0; transform < 2; ++transform) {
    for (uint32_t scale = 0; scale < 65536; ++scale) {
      for (int code = 0; code < 16; ++code) {
        expected[(size_t(transform) * 65536 + scale) * 16 + code] = dequantize(
            transform == 0 ? Transform::kOrdinary : Transform::kFolded, uint8_t(code), uint16_t(scale));
      }
    }
  }
  const absl::StatusOr<WordMismatches> found = CompareDequantizeWordOnDevice(expected);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->count, 0u) << "first: transform " << found->transform << " scale bits "
                              << found->scale_bits << " word " << found->word << " k " << found->k << " got "
                              << found->got << " want " << found->want;
}

}  // namespace
}  // namespace mxdiff::testing
