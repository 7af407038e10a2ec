// The reference's E2M1 and E8M0 decoding against ml_dtypes (float4_e2m1fn, float8_e8m0fnu) on
// every code and every byte. The table is a safetensors file written by the official package
// at test time (write_fixtures.py), read with the audit's own parser; values compare as bits.
#include <bit>
#include <cmath>
#include <fstream>
#include <iterator>

#include "gtest/gtest.h"
#include "reference/fp16.h"
#include "reference/mx_spec.h"
#include "reference/transform.h"
#include "checkpoint/safetensors_header.h"

namespace mxdiff::checkpoint {
namespace {

class DecodeTable : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = std::string(MXDIFF_AUDIT_FIXTURES) + "/decode_table.safetensors";
    std::ifstream stream(path, std::ios::binary);
    ASSERT_TRUE(stream) << path << " is missing: the ctest fixture audit_write_fixtures writes it";
    bytes_.assign(std::istreambuf_iterator<char>(stream), std::istreambuf_iterator<char>());
    absl::StatusOr<SafetensorsHeader> header = ParseSafetensorsBuffer(path, bytes_);
    ASSERT_TRUE(header.ok()) << header.status();
    header_ = *std::move(header);
  }
  template <typename T>
  std::vector<T> Values(const std::string& name, Dtype dtype) {
    const TensorInfo* tensor = header_.Find(name);
    EXPECT_NE(tensor, nullptr) << name;
    if (tensor == nullptr) return {};
    EXPECT_EQ(tensor->dtype, dtype) << name;
    std::vector<T> values(tensor->byte_size() / sizeof(T));
    std::memcpy(values.data(), bytes_.data() + header_.data_start + tensor->begin, tensor->byte_size());
    return values;
  }
  std::vector<uint8_t> bytes_;
  SafetensorsHeader header_;
};

// Equal as values and as bits (so -0 against +0 and the NaN's presence count).
void ExpectSameDouble(double reference, double ml_dtypes, const std::string& what) {
  if (std::isnan(ml_dtypes)) {
    EXPECT_TRUE(std::isnan(reference)) << what << ": ml_dtypes NaN, reference " << reference;
    return;
  }
  EXPECT_EQ(std::bit_cast<uint64_t>(reference), std::bit_cast<uint64_t>(ml_dtypes))
      << what << ": reference " << reference << ", ml_dtypes " << ml_dtypes;
}

TEST_F(DecodeTable, E8m0EveryByte) {
  const std::vector<uint8_t> raws = Values<uint8_t>("e8m0_bytes", Dtype::kU8);
  const std::vector<double> values = Values<double>("e8m0_values", Dtype::kF64);
  ASSERT_EQ(raws.size(), 256u);
  ASSERT_EQ(values.size(), 256u);
  for (int i = 0; i < 256; ++i) {
    ASSERT_EQ(raws[i], i);
    // The scale's value is the MX value of the element 1.0 (E2M1 code 0x2) in its block.
    ExpectSameDouble(MxSpecElement(0x2, raws[i]).ToDouble(), values[i], "E8M0 raw " + std::to_string(i));
  }
  EXPECT_TRUE(std::isnan(values[255]));  // the one NaN byte
}

TEST_F(DecodeTable, E2m1EveryCode) {
  const std::vector<uint8_t> codes = Values<uint8_t>("e2m1_codes", Dtype::kU8);
  const std::vector<double> values = Values<double>("e2m1_values", Dtype::kF64);
  ASSERT_EQ(codes.size(), 16u);
  ASSERT_EQ(values.size(), 16u);
  for (int i = 0; i < 16; ++i) {
    ASSERT_EQ(codes[i], i);
    const std::string what = "E2M1 code " + std::to_string(i);
    // The spec value under scale 2^0 (raw 127), -0 for code 0x8 included.
    ExpectSameDouble(MxSpecElement(codes[i], 127).ToDouble(), values[i], what + " (MxSpecElement)");
    // E2m1Halves has no -0 (0x8 gives 0): equal as numbers.
    EXPECT_EQ(E2m1Halves(codes[i]) / 2.0, values[i]) << what << " (E2m1Halves)";
    // The kernels' placement: fp16 bits that are exactly e2m1 x 2^-14.
    const double placed = std::ldexp(double(f16_to_f32(place_e2m1(codes[i]))), 14);
    ExpectSameDouble(placed, values[i], what + " (place_e2m1 x 2^14)");
  }
}

}  // namespace
}  // namespace mxdiff::checkpoint
