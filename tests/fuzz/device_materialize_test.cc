// The device materialization (fuzz/formats/tensor_recipe_device.h) against the host's
// Materialize*, bit for bit: every kind, every class it allows, rare rates 0, 2 and 16, overrides
// (two at one index: the later wins), sizes from one unit to a W13 PP2xTP4 layer of 6 experts.
// Label gpu: skips with a message where no device exists.
#include <string>
#include <vector>

#include "fuzz/formats/tensor_recipe.h"
#include "fuzz/formats/tensor_recipe_device.h"
#include "gtest/gtest.h"
#include "reference/decode_shapes.h"
#include "reference/hash.h"
#include "tests/reference/test_seed.h"

namespace mxdiff::fuzz {
namespace {

std::vector<uint8_t> OnHost(TensorKind kind, const TensorRecipe& recipe, size_t bytes) {
  std::vector<uint8_t> out(bytes);
  if (kind == TensorKind::kActivations) {
    MaterializeActivations(recipe, {reinterpret_cast<uint16_t*>(out.data()), bytes / 2});
  } else if (kind == TensorKind::kCodes) {
    MaterializeCodes(recipe, out);
  } else {
    MaterializeScales(recipe, out);
  }
  return out;
}

TEST(DeviceMaterialize, EqualsTheHostBitForBit) {
  std::string why;
  if (!DeviceMaterializationAvailable(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  SplitMix64 rng(mxdiff::testing::TestSeed());
  const size_t w13_codes = size_t(kDecodeTopK) * kW13Tp4.n * kW13Tp4.k / 2;  // 12.6 MB
  for (TensorKind kind : {TensorKind::kActivations, TensorKind::kCodes, TensorKind::kScales}) {
    const size_t unit = kind == TensorKind::kActivations ? 2 : kind == TensorKind::kCodes ? 8 : 1;
    for (int c = 0; c < kValueClassCount; ++c) {
      if (!ValueClassAllowed(kind, ValueClass(c))) continue;
      for (int rare : {0, 2, 16}) {
        for (size_t bytes : {unit, unit * 1000, unit * 65537, w13_codes}) {
          TensorRecipe recipe{ValueClass(c), rare, rng.Next(), {}};
          const size_t elements = kind == TensorKind::kCodes ? bytes * 2 : bytes / unit;
          const int max_value = MaxElementValue(kind);
          for (int o = 0; o < 65; ++o) {  // more than one launch's batch
            recipe.overrides.push_back({uint32_t(rng.Next() % elements), uint16_t(rng.Next() % (max_value + 1))});
          }
          recipe.overrides.push_back({recipe.overrides[3].index, uint16_t(max_value - recipe.overrides[3].value)});
          std::vector<uint8_t> device(bytes);
          ASSERT_TRUE(MaterializeOnDeviceToHost(kind, recipe, device).ok());
          const std::vector<uint8_t> host = OnHost(kind, recipe, bytes);
          size_t first = 0;
          while (first < bytes && host[first] == device[first]) ++first;
          ASSERT_EQ(first, bytes) << TensorKindName(kind) << " " << DescribeRecipe(recipe) << ", " << bytes
                                  << " bytes: byte " << first << " is 0x" << std::hex << int(device[first])
                                  << " on the device, 0x" << int(host[first]) << " on the host";
        }
      }
    }
  }
}

TEST(DeviceMaterialize, RefusesBadSizesAndClasses) {
  std::string why;
  if (!DeviceMaterializationAvailable(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  std::vector<uint8_t> odd(7);
  EXPECT_EQ(MaterializeOnDeviceToHost(TensorKind::kCodes, TensorRecipe{}, odd).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MaterializeOnDeviceToHost(TensorKind::kActivations, TensorRecipe{}, odd).code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<uint8_t> some(64);
  EXPECT_EQ(MaterializeOnDeviceToHost(TensorKind::kCodes, TensorRecipe{ValueClass::kCheckpoint, 0, 1, {}}, some).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mxdiff::fuzz
