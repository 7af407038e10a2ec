// reference/hash.h: FNV-1a and SplitMix64 pinned to their published values, and the values the
// project prints and stores that hang on them (the admission rule's fingerprint in every audit
// report, the streams replayed from printed seeds) pinned so that they cannot move.
#include "reference/hash.h"

#include <array>
#include <string_view>

#include "gtest/gtest.h"
#include "reference/admission.h"

namespace mxdiff {
namespace {

std::span<const uint8_t> Bytes(std::string_view text) {
  return {reinterpret_cast<const uint8_t*>(text.data()), text.size()};
}

// The FNV specification's test vectors.
TEST(Fnv1a64Test, PublishedVectors) {
  EXPECT_EQ(Fnv1a64(Bytes("")), 0xcbf29ce484222325ull);
  EXPECT_EQ(Fnv1a64(Bytes("a")), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(Fnv1a64(Bytes("foobar")), 0x85944171f73967e8ull);
  static_assert(Fnv1a64(std::span<const uint8_t>{}) == kFnv1a64Basis);
}

TEST(Fnv1a64Test, LittleEndianMixIsByteMix) {
  const std::array<uint8_t, 4> bytes = {0x78, 0x56, 0x34, 0x12};
  EXPECT_EQ(Fnv1a64MixLittleEndian(kFnv1a64Basis, 0x12345678u, 4), Fnv1a64(bytes));
  EXPECT_EQ(Fnv1a64MixLittleEndian(kFnv1a64Basis, 0xFFFF5678u, 2), Fnv1a64(std::span(bytes).first(2)));
}

// Printed in every audit report and checked by the kernels' prepare step: it must not move.
TEST(Fnv1a64Test, AdmissionRuleFingerprintIsPinned) {
  EXPECT_EQ(AdmissionRuleVersion(), "fold-bitwise-equal-all-codes/113..128/fnv1a64:9f02fa391edcbadc");
}

// Vigna's splitmix64.c.
TEST(SplitMix64Test, ReferenceOutputs) {
  SplitMix64 zero(0);
  EXPECT_EQ(zero.Next(), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(zero.Next(), 0x6E789E6AA1B965F4ull);
  EXPECT_EQ(zero(), 0x06C45D188009454Full);
  SplitMix64 other(1234567);
  EXPECT_EQ(other.Next(), 6457827717110365317ull);
  EXPECT_EQ(other.Next(), 3203168211198807973ull);
  EXPECT_EQ(other.Next(), 9817491932198370423ull);
  EXPECT_EQ(SplitMix64::Finalize(0 + 3 * SplitMix64::kGamma), 0x06C45D188009454Full);
  SplitMix64 below(0);
  EXPECT_EQ(below.Below(1000), 0xE220A8397B1DCDAFull % 1000);
}

}  // namespace
}  // namespace mxdiff
