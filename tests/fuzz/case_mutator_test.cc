#include "fuzz/case_mutator.h"

#include <random>
#include <set>

#include "fuzz/target_driver.h"
#include "gtest/gtest.h"
#include "tests/reference/test_seed.h"

namespace mxdiff::fuzz {
namespace {

bool WithinProfile(const FuzzCase& c, const MutationProfile& p) {
  if (c.groups > p.max_groups || c.n > p.max_n || c.k > p.max_k) return false;
  for (int g = 0; g < c.groups; ++g) {
    if (c.row_offsets[g + 1] - c.row_offsets[g] > p.max_rows_per_group) return false;
  }
  return true;
}

TEST(CaseMutator, EveryMutationIsAValidCaseWithinTheProfile) {
  CaseRng rng(mxdiff::testing::TestSeed());
  for (const MutationProfile& profile : {kTransformProfile, kDispatchProfile, kReferenceProfile, kGemmProfile}) {
    FuzzCase c = RandomCase(rng, profile);
    for (int i = 0; i < 3000; ++i) {
      MutateCase(c, rng, profile);
      const absl::Status status = ValidateCase(c);
      ASSERT_TRUE(status.ok()) << "mutation " << i << ": " << status;
      ASSERT_TRUE(WithinProfile(c, profile)) << "mutation " << i << " left the profile:\n" << DescribeCase(c);
    }
  }
}

TEST(CaseMutator, ReachesEveryScaleClassRequestPolicyAndModel) {
  CaseRng rng(mxdiff::testing::TestSeed());
  FuzzCase c = RandomCase(rng, kDispatchProfile);
  std::set<int> classes, requests, policies, models, splits;
  for (int i = 0; i < 5000; ++i) {
    MutateCase(c, rng, kDispatchProfile);
    for (uint8_t raw : c.scale_bytes) {
      const int a = adjusted_exponent(raw);
      classes.insert(a == 0 ? 0 : a <= 16 ? 1 : a == 17 ? 2 : a < 30 ? 3 : 4);
    }
    requests.insert(int(c.request));
    policies.insert(int(c.policy));
    models.insert(int(c.model));
    splits.insert(c.tactic.splits > 1 ? 1 : 0);
  }
  EXPECT_EQ(classes.size(), 5u);
  EXPECT_EQ(requests.size(), 3u);
  EXPECT_EQ(policies.size(), 2u);
  EXPECT_EQ(models.size(), size_t(kStepModelCount));
  EXPECT_EQ(splits.size(), 2u);
}

TEST(CaseMutator, EncodedMutationRepairsGarbageAndRespectsMaxSize) {
  CaseRng rng(mxdiff::testing::TestSeed());
  std::vector<uint8_t> buffer(4096);
  size_t size = 7;
  for (size_t i = 0; i < size; ++i) buffer[i] = uint8_t(rng());
  for (int i = 0; i < 2000; ++i) {
    const size_t max_size = 200 + rng() % 3000;
    size = std::min(size, max_size);
    const size_t mutated = MutateEncodedCase(buffer.data(), size, max_size, unsigned(rng()), kReferenceProfile, {});
    ASSERT_LE(mutated, max_size);
    if (mutated == 0) continue;  // no case that small: libFuzzer keeps the input
    size = mutated;
    absl::StatusOr<FuzzCase> decoded = DecodeCase(std::span<const uint8_t>(buffer.data(), size));
    ASSERT_TRUE(decoded.ok()) << "iteration " << i << ": " << decoded.status();
  }
}

}  // namespace
}  // namespace mxdiff::fuzz
