// The external-kernel C ABI end to end: the example library loads, agrees with the reference
// on random cases through the differential harness, and a planted one-bit error in it
// becomes a mismatch finding with a stable signature.
#include <cstdlib>
#include <random>

#include "fuzz/mutators/case_mutator.h"
#include "fuzz/checks/gemm_differential.h"
#include "fuzz/modules/external_module.h"
#include "fuzz/driver/target_driver.h"
#include "gtest/gtest.h"
#include "tests/reference/test_seed.h"

namespace mxdiff::fuzz {
namespace {

std::unique_ptr<GemmDifferential> WithExample() {
  absl::StatusOr<std::unique_ptr<GemmModule>> module = LoadExternalModule(MXDIFF_EXAMPLE_KERNEL);
  EXPECT_TRUE(module.ok()) << module.status();
  if (!module.ok()) return nullptr;
  EXPECT_EQ((*module)->name(), "ext-example-reference");
  std::vector<std::unique_ptr<GemmModule>> modules;
  modules.push_back(*std::move(module));
  return std::make_unique<GemmDifferential>(std::move(modules));
}

TEST(ExternalModule, ExampleKernelAgreesWithTheReference) {
  std::unique_ptr<GemmDifferential> differential = WithExample();
  ASSERT_NE(differential, nullptr);
  CaseRng rng(mxdiff::testing::TestSeed());
  for (int i = 0; i < 60; ++i) {
    const FuzzCase c = RandomCase(rng, kReferenceProfile);
    const CheckResult finding = differential->CheckCase(c);
    ASSERT_FALSE(finding.has_value()) << finding->signature << "\n" << finding->description << "\n"
                                      << DescribeCase(c);
  }
  EXPECT_GT(differential->cases_compared(), 0u);
}

TEST(ExternalModule, AFlippedBitIsAMismatchFinding) {
  std::unique_ptr<GemmDifferential> differential = WithExample();
  ASSERT_NE(differential, nullptr);
  CaseRng rng(mxdiff::testing::TestSeed());
  FuzzCase c = RandomCase(rng, kReferenceProfile);
  while (c.rows() == 0) c = RandomCase(rng, kReferenceProfile);
  for (uint16_t& a : c.activations) a = 0x3C00;   // finite outputs: a flipped low bit is 1 ulp
  for (uint8_t& raw : c.scale_bytes) raw = 120;
  setenv("MXDIFF_EXAMPLE_KERNEL_FLIP", "1", 1);
  const CheckResult finding = differential->CheckCase(c);
  unsetenv("MXDIFF_EXAMPLE_KERNEL_FLIP");
  ASSERT_TRUE(finding.has_value());
  EXPECT_EQ(finding->signature.rfind("mismatch/ext-example-reference/", 0), 0u) << finding->signature;
  EXPECT_NE(finding->description.find("1 ulp"), std::string::npos) << finding->description;
}

TEST(ExternalModule, BadLibrariesAreClearErrors) {
  const absl::StatusOr<std::unique_ptr<GemmModule>> missing = LoadExternalModule("/nonexistent/libkernel.so");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  // A shared library without the entry symbol (libc is always there).
  const absl::StatusOr<std::unique_ptr<GemmModule>> wrong = LoadExternalModule("libc.so.6");
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kFailedPrecondition) << wrong.status();
}

TEST(ExternalModule, AFailuresKindIsItsMessagesPrefix) {
  EXPECT_EQ(KernelFailureKind("python/bound: 3 elements outside the bound"), "python/bound");
  EXPECT_EQ(KernelFailureKind("python/raised: ValueError: no"), "python/raised");
  EXPECT_EQ(KernelFailureKind("my-kernel/smem_2: too much"), "my-kernel/smem_2");
  EXPECT_EQ(KernelFailureKind("bad problem descriptor"), "");
  EXPECT_EQ(KernelFailureKind("error: one word is no kind"), "");
  EXPECT_EQ(KernelFailureKind("Python/Bound: upper case"), "");
  EXPECT_EQ(KernelFailureKind("python//bound: empty word"), "");
  EXPECT_EQ(KernelFailureKind("python/: empty word"), "");
  EXPECT_EQ(KernelFailureKind("python/bound 3 elements: no colon right after"), "");
  EXPECT_EQ(FailureKindOf(absl::InternalError("python/bound: not from an external module")), "");
}

}  // namespace
}  // namespace mxdiff::fuzz
