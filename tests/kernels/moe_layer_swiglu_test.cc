// Host == device, bit for bit, for the MoE layer's shared arithmetic: the clamped SwiGLU over
// every fp16 gate x 256 ups (specials and the clamp's edges included), exp and silu over a sweep
// of fp32 bit patterns with specials, and the weighted sum's two steps on random and extreme
// operands. The device sweeps are also hashed against the constants that pin the host's bits
// (tests/reference/moe_layer_sweep.h), so the GPU is tied to them too.
#include <cuda_runtime.h>

#include <random>

#include "fmt/core.h"
#include "gtest/gtest.h"
#include "reference/moe_layer_combine.h"
#include "reference/swiglu.h"
#include "tests/kernels/moe_layer_swiglu_device.h"
#include "tests/kernels/random_layer.h"
#include "tests/reference/moe_layer_sweep.h"

namespace mxdiff::testing {
namespace {

bool HaveDevice(std::string* why) {
  int devices = 0;
  const cudaError_t error = cudaGetDeviceCount(&devices);
  if (error == cudaSuccess && devices > 0) return true;
  *why = error != cudaSuccess ? cudaGetErrorString(error) : "none found";
  return false;
}

TEST(MoeLayerSwigluDeviceTest, SwigluOverEveryGateEqualsTheHost) {
  std::string why;
  if (!HaveDevice(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  const std::vector<uint16_t> ups = SwigluSweepUps();
  absl::StatusOr<std::vector<uint16_t>> device = DeviceSwigluSweep(ups, kSwigluLimit);
  ASSERT_TRUE(device.ok()) << device.status();
  size_t mismatches = 0;
  uint64_t hash = kFnv1a64Basis;
  for (uint32_t gate = 0; gate < 65536; ++gate) {
    for (size_t u = 0; u < ups.size(); ++u) {
      const uint16_t got = (*device)[size_t(gate) * ups.size() + u];
      hash = Fnv1a64MixLittleEndian(hash, got, 2);
      const uint16_t want = swiglu_f16(uint16_t(gate), ups[u], kSwigluLimit);
      if (got != want && mismatches++ < 5) {
        ADD_FAILURE() << fmt::format("gate 0x{:04x} up 0x{:04x}: device 0x{:04x}, host 0x{:04x}", gate, ups[u], got,
                                     want);
      }
    }
  }
  fmt::print("swiglu_f16: {} inputs, {} host/device mismatches, device hash 0x{:016x}\n", device->size(), mismatches,
             hash);
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(hash, kSwigluHash);
}

TEST(MoeLayerSwigluDeviceTest, ExpAndSiluEqualTheHost) {
  std::string why;
  if (!HaveDevice(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  const std::vector<uint32_t> inputs = ExpSweepInputs();
  absl::StatusOr<std::vector<uint32_t>> exp = DeviceExp(inputs);
  absl::StatusOr<std::vector<uint32_t>> silu = DeviceSilu(inputs);
  ASSERT_TRUE(exp.ok()) << exp.status();
  ASSERT_TRUE(silu.ok()) << silu.status();
  size_t mismatches = 0;
  uint64_t hash = kFnv1a64Basis;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const float x = bits_to_f32(inputs[i]);
    hash = Fnv1a64MixLittleEndian(hash, (*exp)[i], 4);
    // exp returns a NaN input unchanged on both sides: exact bits. silu's fp32 operations may
    // give a NaN another payload on the host (x86 keeps the operand's) than on the device (the
    // canonical NaN); the payload is not part of the contract, since the layer rounds every NaN
    // to the canonical fp16 NaN (the SwiGLU sweep above checks that, exactly).
    if ((*exp)[i] != f32_to_bits(swiglu_exp(x)) && mismatches++ < 5) {
      ADD_FAILURE() << fmt::format("exp(0x{:08x}): device 0x{:08x}, host 0x{:08x}", inputs[i], (*exp)[i],
                                   f32_to_bits(swiglu_exp(x)));
    }
    const uint32_t silu_host = f32_to_bits(swiglu_silu(x));
    if ((*silu)[i] != silu_host && !(f32_is_nan((*silu)[i]) && f32_is_nan(silu_host)) && mismatches++ < 5) {
      ADD_FAILURE() << fmt::format("silu(0x{:08x}): device 0x{:08x}, host 0x{:08x}", inputs[i], (*silu)[i],
                                   f32_to_bits(swiglu_silu(x)));
    }
  }
  fmt::print("swiglu_exp, swiglu_silu: {} inputs each, {} host/device mismatches, device exp hash 0x{:016x}\n",
             inputs.size(), mismatches, hash);
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(hash, kExpHash);
}

TEST(MoeLayerSwigluDeviceTest, CombineStepsEqualTheHost) {
  std::string why;
  if (!HaveDevice(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  std::mt19937_64 rng(TestSeed("MoeLayerSwigluDeviceTest.Combine"));
  static constexpr uint32_t kSpecial[] = {0x00000000, 0x80000000, 0x00000001, 0x7F800000, 0xFF800000, 0x7FC00000,
                                          0x7F7FFFFF, 0x33800000, 0x4B800000, 0xCB800000};
  const size_t count = size_t(1) << 22;
  std::vector<uint32_t> acc(count), weight(count);
  std::vector<uint16_t> y(count);
  for (size_t i = 0; i < count; ++i) {
    acc[i] = rng() % 16 == 0 ? kSpecial[rng() % 10] : uint32_t(rng());
    weight[i] = rng() % 16 == 0 ? kSpecial[rng() % 10] : uint32_t(rng());
    y[i] = uint16_t(rng());
  }
  absl::StatusOr<std::vector<uint32_t>> device = DeviceCombine(acc, weight, y);
  ASSERT_TRUE(device.ok()) << device.status();
  size_t mismatches = 0;
  for (size_t i = 0; i < count; ++i) {
    const float a = bits_to_f32(acc[i]), w = bits_to_f32(weight[i]);
    const uint32_t slot = f32_to_bits(moe_combine_slot(a, w, y[i]));
    const uint32_t shared = f32_to_bits(moe_combine_shared(a, y[i]));
    // A NaN's payload is not part of the contract (the layer's output rounds every NaN to the
    // canonical fp16 NaN); everything else must match exactly.
    auto same = [](uint32_t p, uint32_t q) { return p == q || (f32_is_nan(p) && f32_is_nan(q)); };
    if ((!same((*device)[2 * i], slot) || !same((*device)[2 * i + 1], shared)) && mismatches++ < 5) {
      ADD_FAILURE() << fmt::format("acc 0x{:08x} w 0x{:08x} y 0x{:04x}: device 0x{:08x} 0x{:08x}, host 0x{:08x} 0x{:08x}",
                                   acc[i], weight[i], y[i], (*device)[2 * i], (*device)[2 * i + 1], slot, shared);
    }
  }
  fmt::print("combine steps: {} operand triples, {} host/device mismatches\n", count, mismatches);
  EXPECT_EQ(mismatches, 0u);
}

}  // namespace
}  // namespace mxdiff::testing
