// The external-kernel C ABI end to end: the example library loads, agrees with the reference
// on random cases through the differential harness, and a planted one-bit error in it
// becomes a mismatch finding with a stable signature; a kernel that writes into its inputs is a
// finding of its own and never changes what the reference reads.
#include <algorithm>
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

// What a hostile kernel writes into before it computes, correctly, on what it wrote.
enum class Writes { kNothing, kRowOffsets, kActivations, kCodes, kScales };

// The example library behind a wrapper that first writes into one input through its const
// pointer, as a kernel casting const away does (a flush of subnormals in place, say).
class InputWriter final : public GemmModule {
 public:
  InputWriter(std::unique_ptr<GemmModule> inner, Writes writes) : inner_(std::move(inner)), writes_(writes) {}
  std::string name() const override { return "ext-writer"; }
  std::optional<StepModel> model() const override { return inner_->model(); }
  Tactic MapTactic(const FuzzCase& c) const override { return inner_->MapTactic(c); }
  absl::StatusOr<Route> ExpectedRoute(const FuzzCase& c, const Tactic& tactic,
                                      const LayerAdmission& admission) const override {
    return inner_->ExpectedRoute(c, tactic, admission);
  }
  bool ExposesHostInputs() const override { return inner_->ExposesHostInputs(); }
  absl::StatusOr<Route> Run(const FuzzCase& c, const Tactic& tactic, std::span<uint16_t> output) override {
    FuzzCase& writable = const_cast<FuzzCase&>(c);
    switch (writes_) {
      case Writes::kNothing:
        break;
      case Writes::kRowOffsets: {  // every row to group 0, or every row to the last group
        const int32_t to = c.row_offsets[1] != 0 ? 0 : c.rows();
        std::fill(writable.row_offsets.begin() + 1, writable.row_offsets.end() - 1, to);
        break;
      }
      case Writes::kActivations:
        std::fill(writable.activations.begin(), writable.activations.end(), uint16_t{0});
        break;
      case Writes::kCodes:
        writable.packed_codes[0] ^= 0x11;
        break;
      case Writes::kScales:
        writable.scale_bytes[0] ^= 1;
        break;
    }
    return inner_->Run(c, tactic, output);
  }

 private:
  std::unique_ptr<GemmModule> inner_;
  Writes writes_;
};

TEST(ExternalModule, AKernelThatWritesItsInputsIsAFindingAndTheCaseIsUntouched) {
  CaseRng rng(mxdiff::testing::TestSeed());
  FuzzCase c = RandomCase(rng, kReferenceProfile);
  while (c.groups < 2 || c.rows() == 0 || c.activations.empty()) c = RandomCase(rng, kReferenceProfile);
  for (uint16_t& a : c.activations) a = 0x3C00;  // every output depends on them: zeroing them shows
  for (uint8_t& raw : c.scale_bytes) raw = 120;
  const FuzzCase before = c;
  struct Expected {
    Writes writes;
    std::string_view input;
  };
  for (const Expected& expected : {Expected{Writes::kNothing, ""}, Expected{Writes::kRowOffsets, "row_offsets: "},
                                   Expected{Writes::kActivations, "activations: "},
                                   Expected{Writes::kCodes, "packed_codes: 1 of "},
                                   Expected{Writes::kScales, "scale_bytes: 1 of "}}) {
    absl::StatusOr<std::unique_ptr<GemmModule>> example = LoadExternalModule(MXDIFF_EXAMPLE_KERNEL);
    ASSERT_TRUE(example.ok()) << example.status();
    ASSERT_TRUE((*example)->ExposesHostInputs());
    std::vector<std::unique_ptr<GemmModule>> modules;
    modules.push_back(std::make_unique<InputWriter>(*std::move(example), expected.writes));
    GemmDifferential differential(std::move(modules));
    const CaseEvaluation evaluation = differential.Evaluate(c);
    EXPECT_EQ(c, before) << expected.input << ": the harness's case changed";
    std::vector<std::string> inputs_signatures;
    for (const CheckVerdict& verdict : evaluation.verdicts) {
      if (verdict.check == "inputs") inputs_signatures.push_back(verdict.finding ? verdict.finding->signature : "ok");
    }
    const CheckVerdict* first = evaluation.FirstFinding();
    if (expected.writes == Writes::kNothing) {
      EXPECT_EQ(inputs_signatures, std::vector<std::string>{"ok"});
      EXPECT_EQ(first, nullptr) << first->finding->signature << ": " << first->finding->description;
      continue;
    }
    // One verdict for the module (the determinism rerun writes again: not a second finding).
    EXPECT_EQ(inputs_signatures, std::vector<std::string>{"abi/ext-writer/inputs-modified"}) << expected.input;
    ASSERT_NE(first, nullptr) << expected.input;
    EXPECT_EQ(first->finding->signature, "abi/ext-writer/inputs-modified");
    EXPECT_NE(first->finding->description.find(expected.input), std::string::npos) << first->finding->description;
    if (expected.writes == Writes::kActivations) {
      // The reference read the case, not what the kernel computed on: the defect itself shows too.
      bool mismatch = false;
      for (const CheckVerdict& verdict : evaluation.verdicts) {
        mismatch |= verdict.finding && verdict.finding->signature.starts_with("mismatch/ext-writer/");
      }
      EXPECT_TRUE(mismatch);
    }
  }
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
