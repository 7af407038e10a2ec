// The external-kernel C ABI end to end: the example library loads, agrees with the reference
// on random cases through the differential harness, and a planted one-bit error in it
// becomes a mismatch finding with a stable signature; a kernel that writes into its inputs is a
// finding of its own and never changes what the reference reads.
#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <random>

#include "fuzz/mutators/case_mutator.h"
#include "fuzz/checks/gemm_differential.h"
#include "fuzz/modules/external_module.h"
#include "fuzz/driver/target_driver.h"
#include "fuzz/driver/fuzz_target.h"
#include "fuzz/driver/gemm_counters.h"
#include "reference/reference_gemm.h"
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

TEST(ExternalModule, AKernelThatWritesItsInputsIsAFindingAndTheCaseIsUntouched) {
  CaseRng rng(mxdiff::testing::TestSeed());
  FuzzCase c = RandomCase(rng, kReferenceProfile);
  while (c.groups < 2 || c.rows() == 0 || c.activations.empty()) c = RandomCase(rng, kReferenceProfile);
  for (uint16_t& a : c.activations) a = 0x3C00;  // every output depends on them: zeroing them shows
  for (uint8_t& raw : c.scale_bytes) raw = 120;
  const FuzzCase before = c;
  // tests/tools/campaign/hostile_kernel.cc writes into one input through its const pointer, as a
  // kernel casting const away does (a flush of subnormals in place, say), then computes correctly
  // on what it wrote; "" writes nothing (the example library).
  struct Expected {
    std::string_view writes;
    std::string_view input;
  };
  for (const Expected& expected : {Expected{"", ""}, Expected{"write-row-offsets", "row_offsets: "},
                                   Expected{"write-activations", "activations: "},
                                   Expected{"write-codes", "packed_codes: 1 of "},
                                   Expected{"write-scales", "scale_bytes: 1 of "}}) {
    setenv("MXDIFF_HOSTILE_KERNEL", std::string(expected.writes).c_str(), 1);
    absl::StatusOr<std::unique_ptr<GemmModule>> kernel =
        LoadExternalModule(expected.writes.empty() ? MXDIFF_EXAMPLE_KERNEL : MXDIFF_HOSTILE_KERNEL_LIBRARY);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    std::vector<std::unique_ptr<GemmModule>> modules;
    modules.push_back(*std::move(kernel));
    GemmDifferential differential(std::move(modules));
    const CaseEvaluation evaluation = differential.Evaluate(c);
    unsetenv("MXDIFF_HOSTILE_KERNEL");
    EXPECT_EQ(c, before) << expected.input << ": the harness's case changed";
    std::vector<std::string> inputs_signatures;
    for (const CheckVerdict& verdict : evaluation.verdicts) {
      if (verdict.check == "inputs") inputs_signatures.push_back(verdict.finding ? verdict.finding->signature : "ok");
    }
    const CheckVerdict* first = evaluation.FirstFinding();
    if (expected.writes.empty()) {
      EXPECT_EQ(inputs_signatures, std::vector<std::string>{"ok"});
      EXPECT_EQ(first, nullptr) << first->finding->signature << ": " << first->finding->description;
      continue;
    }
    // One verdict for the module (the determinism rerun writes again: not a second finding).
    EXPECT_EQ(inputs_signatures, std::vector<std::string>{"abi/ext-hostile/inputs-modified"}) << expected.input;
    ASSERT_NE(first, nullptr) << expected.input;
    EXPECT_EQ(first->finding->signature, "abi/ext-hostile/inputs-modified");
    EXPECT_NE(first->finding->description.find(expected.input), std::string::npos) << first->finding->description;
    if (expected.writes == "write-activations") {
      // The reference read the case, not what the kernel computed on: the defect itself shows too.
      bool mismatch = false;
      for (const CheckVerdict& verdict : evaluation.verdicts) {
        mismatch |= verdict.finding && verdict.finding->signature.starts_with("mismatch/ext-hostile/");
      }
      EXPECT_TRUE(mismatch);
    }
  }
}

// Plan reporting (kernel C ABI version 2) with the fake of plan_reporting_kernel.cc, on a case whose
// bits depend on the split partition: every weight 1, each row's activations +2^15 at k 0, 2^-12
// at k 128..254, -2^15 at k 255. In one split (the tactic's cta_k 32) every 2^-12 step is lost
// against 2^15 and the row sums to 0; the fake's other plan (cta_k 64, two splits: k 0..127 and
// 128..255) keeps them in the second split and the row sums to 2^-5.
FuzzCase PlanCase() {
  FuzzCase c;
  const int rows[] = {2, 0, 3};
  ResizeCase(c, 3, 32, 256, rows);
  for (int row = 0; row < c.rows(); ++row) {
    uint16_t* a = c.activations.data() + size_t(row) * size_t(c.k);
    a[0] = 0x7800;                                  // 2^15
    for (int k = 128; k < 255; ++k) a[k] = 0x0C00;  // 2^-12
    a[255] = 0xF800;                                // -2^15
  }
  std::fill(c.packed_codes.begin(), c.packed_codes.end(), uint8_t{0x22});  // code 2: 1.0
  std::fill(c.scale_bytes.begin(), c.scale_bytes.end(), uint8_t{127});     // 2^0
  c.tactic = Tactic{16, 128, 32, 1, 0};
  c.request = TransformRequest::kOrdinary;
  c.policy = FallbackPolicy::kFallback;
  c.model = StepModel::kSm90Emulated;
  return c;
}

struct PlanEvaluation {
  CaseEvaluation evaluation;
  std::string counters;  // CountersText
  std::string first;     // the first finding's signature, or "clean"
};

PlanEvaluation EvaluateWithPlanKernel(const char* library, const char* mode, const FuzzCase& c) {
  setenv("MXDIFF_PLAN_KERNEL", mode, 1);
  PlanEvaluation result;
  absl::StatusOr<std::unique_ptr<GemmModule>> module = LoadExternalModule(library);
  EXPECT_TRUE(module.ok()) << module.status();
  if (module.ok()) {
    std::vector<std::unique_ptr<GemmModule>> modules;
    modules.push_back(*std::move(module));
    GemmDifferential differential(std::move(modules));
    result.evaluation = differential.Evaluate(c);
    result.counters = CountersText(differential.counters());
    const CheckVerdict* first = result.evaluation.FirstFinding();
    result.first = first != nullptr ? first->finding->signature : "clean";
  }
  unsetenv("MXDIFF_PLAN_KERNEL");
  return result;
}

// The fake's other plan changes the bits of this case, so judging by the wrong plan shows.
TEST(PlanReporting, TheCasesBitsDependOnThePlan) {
  const FuzzCase c = PlanCase();
  ReferenceOptions requested, other;
  requested.tactic = c.tactic;
  other.tactic = c.tactic;
  other.tactic.cta_k = 64;
  other.tactic.splits = 2;
  std::vector<uint16_t> requested_bits, other_bits;
  ASSERT_TRUE(ReferenceGemm(c.Problem(), requested, requested_bits).ok());
  ASSERT_TRUE(ReferenceGemm(c.Problem(), other, other_bits).ok());
  EXPECT_EQ(requested_bits, std::vector<uint16_t>(requested_bits.size(), 0x0000));
  EXPECT_EQ(other_bits, std::vector<uint16_t>(other_bits.size(), 0x2800));  // 2^-5
}

TEST(PlanReporting, AVersion1LibraryLoadsAndIsJudgedByItsTactic) {
  // It computes the requested plan and writes a report where a v2 caller's ran_plan is: a v1
  // library's bytes there are not a report.
  const PlanEvaluation run = EvaluateWithPlanKernel(MXDIFF_PLAN_KERNEL_V1, "lie", PlanCase());
  EXPECT_EQ(run.first, "clean");
  ASSERT_EQ(run.evaluation.runs.size(), 1u);
  EXPECT_EQ(run.evaluation.runs[0].module, "ext-plan-reporter-v1");
  EXPECT_FALSE(run.evaluation.runs[0].ran_plan.has_value());
  EXPECT_NE(run.counters.find("\nmodule_plan_ext-plan-reporter-v1_ctak32_splits1 1\n"), std::string::npos)
      << run.counters;
}

TEST(PlanReporting, AVersion2LibraryThatLeavesThePlanRanTheRequestedOne) {
  const PlanEvaluation run = EvaluateWithPlanKernel(MXDIFF_PLAN_KERNEL, "requested", PlanCase());
  EXPECT_EQ(run.first, "clean");
  ASSERT_EQ(run.evaluation.runs.size(), 1u);
  EXPECT_EQ(run.evaluation.runs[0].ran_plan, (RanPlan{32, 1, ""}));
}

// With no rows nothing runs: the plan the module reports (here the request's, or its own) is not
// counted among the plans it ran.
TEST(PlanReporting, ACaseWithNoRowsCountsNoPlan) {
  FuzzCase c;
  const int rows[] = {0, 0, 0};
  ResizeCase(c, 3, 32, 256, rows);
  for (const char* mode : {"requested", "other"}) {
    const PlanEvaluation run = EvaluateWithPlanKernel(MXDIFF_PLAN_KERNEL, mode, c);
    EXPECT_EQ(run.first, "clean") << mode;
    EXPECT_EQ(run.counters.find("module_plan_"), std::string::npos) << mode << "\n" << run.counters;
  }
}

TEST(PlanReporting, AnotherPlanComputedAsReportedIsClean) {
  const PlanEvaluation run = EvaluateWithPlanKernel(MXDIFF_PLAN_KERNEL, "other", PlanCase());
  EXPECT_EQ(run.first, "clean");
  ASSERT_EQ(run.evaluation.runs.size(), 1u);
  EXPECT_EQ(run.evaluation.runs[0].ran_plan, (RanPlan{64, 2, "fake-k64"}));
  EXPECT_NE(run.counters.find("\nmodule_plan_ext-plan-reporter_ctak64_splits2 1\n"), std::string::npos)
      << run.counters;
  EXPECT_NE(run.counters.find("\nmodule_kernel_ext-plan-reporter_fake-k64 1\n"), std::string::npos) << run.counters;
}

TEST(PlanReporting, APlanReportedButNotRunIsAMismatch) {
  const PlanEvaluation run = EvaluateWithPlanKernel(MXDIFF_PLAN_KERNEL, "lie", PlanCase());
  EXPECT_EQ(run.first, "mismatch/ext-plan-reporter/ordinary/16x128x64/s2/admitted");
  const CheckVerdict* first = run.evaluation.FirstFinding();
  ASSERT_NE(first, nullptr);
  EXPECT_NE(first->finding->description.find("the module reported running cta_k 64 (chunk 64), 2 split(s), kernel "
                                             "fake-k64"),
            std::string::npos)
      << first->finding->description;
}

TEST(PlanReporting, APlanTheReferenceCannotModelIsAFinding) {
  struct Expected {
    const char* mode;
    std::string_view says;
  };
  for (const Expected& expected :
       {Expected{"unknown-cta-k", "(cta_k 7, splits 2)"},
        Expected{"unknown-splits", "5 splits, but k 256 has only 4 chunk(s) of 64: a split would be empty"},
        Expected{"unknown-label", "the kernel label \"no spaces\" is not"}}) {
    const PlanEvaluation run = EvaluateWithPlanKernel(MXDIFF_PLAN_KERNEL, expected.mode, PlanCase());
    EXPECT_EQ(run.first, "abi/ext-plan-reporter/unknown-plan") << expected.mode;
    const CheckVerdict* first = run.evaluation.FirstFinding();
    ASSERT_NE(first, nullptr) << expected.mode;
    EXPECT_EQ(first->check, "bits") << expected.mode;
    EXPECT_NE(first->finding->description.find(expected.says), std::string::npos) << first->finding->description;
    EXPECT_EQ(run.counters.find("module_plan_"), std::string::npos) << expected.mode << ": an unknown plan counted";
  }
}

// The plan must be a function of the request (repro replays it): the determinism rerun holds it.
TEST(PlanReporting, APlanThatChangesBetweenRunsIsNondeterminism) {
  const PlanEvaluation run = EvaluateWithPlanKernel(MXDIFF_PLAN_KERNEL, "alternating", PlanCase());
  EXPECT_EQ(run.first, "nondeterminism/ext-plan-reporter/plan");
  const CheckVerdict* first = run.evaluation.FirstFinding();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->finding->description,
            "ext-plan-reporter: the case again reported cta_k 32 (chunk 32), 1 split(s), the first run cta_k 64 "
            "(chunk 64), 2 split(s), kernel fake-k64");
}

TEST(PlanReporting, AnUnsupportedRequestIsNoFinding) {
  const PlanEvaluation run = EvaluateWithPlanKernel(MXDIFF_PLAN_KERNEL, "unsupported", PlanCase());
  EXPECT_EQ(run.first, "clean");
  ASSERT_EQ(run.evaluation.runs.size(), 1u);
  EXPECT_TRUE(run.evaluation.runs[0].unsupported);
  EXPECT_FALSE(run.evaluation.runs[0].ran_plan.has_value());
}

// A campaign's stats list every plan a module ran, up to kMaxPlanKeys a module; the rest as "other".
TEST(PlanReporting, ThePlanCountsAreBounded) {
  DifferentialCounters counters;
  for (int splits = 1; splits <= int(kMaxPlanKeys) + 10; ++splits) CountPlan(counters, "ext-k", 32, splits, "");
  CountPlan(counters, "ext-k", 32, 1, "tile_a");
  CountPlan(counters, "ordinary", 64, 2, "");
  const std::string text = CountersText(counters);
  EXPECT_NE(text.find("\nmodule_plan_ext-k_ctak32_splits1 2\n"), std::string::npos);
  EXPECT_NE(text.find("\nmodule_plan_ext-k_ctak32_splits256 1\n"), std::string::npos);
  EXPECT_EQ(text.find("module_plan_ext-k_ctak32_splits257 "), std::string::npos);
  EXPECT_NE(text.find("\nmodule_plan_ext-k_other 10\n"), std::string::npos);
  EXPECT_NE(text.find("\nmodule_kernel_ext-k_tile_a 1\n"), std::string::npos);
  EXPECT_NE(text.find("\nmodule_plan_ordinary_ctak64_splits2 1\n"), std::string::npos);
}

// repro of PlanCase with the fake in `mode`: its text, the findings' signatures and --json's plans.
struct PlanRepro {
  std::string text;
  std::vector<std::string> signatures;
  std::vector<ReproRanPlan> plans;
};

PlanRepro ReproWithPlanKernel(const char* mode) {
  PlanRepro repro;
  const FuzzTarget* gemm = FindTarget("fuzz_gemm");
  const absl::StatusOr<std::vector<uint8_t>> bytes = EncodeCase(PlanCase());
  std::FILE* scratch = std::tmpfile();
  if (gemm == nullptr || !bytes.ok() || scratch == nullptr) {
    ADD_FAILURE() << "no fuzz_gemm, no case or no scratch file";
    return repro;
  }
  setenv("MXDIFF_PLAN_KERNEL", mode, 1);
  {
    const std::unique_ptr<ReproSession> session =
        gemm->repro.open(*gemm, {.text = scratch, .external = MXDIFF_PLAN_KERNEL});
    const absl::StatusOr<std::vector<TargetFinding>> findings = session->Explain("plan.case", *bytes);
    EXPECT_TRUE(findings.ok()) << findings.status();
    if (findings.ok()) {
      for (const TargetFinding& finding : *findings) repro.signatures.push_back(finding.finding.signature);
    }
    repro.plans = session->RanPlans();
  }
  unsetenv("MXDIFF_PLAN_KERNEL");
  repro.text.resize(size_t(std::ftell(scratch)));
  std::rewind(scratch);
  repro.text.resize(std::fread(repro.text.data(), 1, repro.text.size(), scratch));
  std::fclose(scratch);
  return repro;
}

// repro says which plan the module ran where it is not the case's, and --json's "plans" has it;
// where the bits follow the case's plan instead, it says so.
TEST(PlanReporting, ReproPrintsThePlanTheModuleRan) {
  const PlanRepro lie = ReproWithPlanKernel("lie");
  EXPECT_EQ(lie.signatures, std::vector<std::string>{"mismatch/ext-plan-reporter/ordinary/16x128x64/s2/admitted"});
  EXPECT_NE(lie.text.find("\n  the case's own plan (cta_k 32, 1 split(s)) reproduces 160 of the 160 mismatching "
                          "elements: the module ran it, not the plan it reported\n"),
            std::string::npos)
      << lie.text;

  const PlanRepro other = ReproWithPlanKernel("other");
  EXPECT_TRUE(other.signatures.empty()) << other.signatures.front();
  EXPECT_NE(other.text.find("\n  plan it ran:    cta_k 64 (chunk 64), 2 split(s), kernel fake-k64 (the case's: cta_k "
                            "32, 1 split(s))\n"),
            std::string::npos)
      << other.text;
  const std::vector<ReproRanPlan>& plans = other.plans;
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(plans[0].module, "ext-plan-reporter");
  EXPECT_EQ(plans[0].cta_k, 64);
  EXPECT_EQ(plans[0].splits, 2);
  EXPECT_EQ(plans[0].kernel, "fake-k64");
  EXPECT_EQ(plans[0].requested_cta_k, 32);
  EXPECT_EQ(plans[0].requested_splits, 1);
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
