// fuzz_gemm's named checks (fuzz/checks/gemm_differential.h) on a module with planted defects, the
// known cases, and the module loader's selection rules. CPU only: the fake module computes
// with the reference itself, so every defect below is one the harness alone must catch.
#include <algorithm>
#include <cstdlib>
#include <thread>

#include "fuzz/mutators/case_minimizer.h"
#include "fuzz/mutators/case_mutator.h"
#include "fuzz/checks/gemm_differential.h"
#include "fuzz/checks/known_cases.h"
#include "fuzz/modules/module_loader.h"
#include "fuzz/driver/target_driver.h"
#include "gtest/gtest.h"
#include "kernels/builtin_kernels.h"
#include "reference/admission.h"
#include "reference/reference_gemm.h"
#include "tests/reference/test_seed.h"

namespace mxdiff::fuzz {
namespace {

enum class Defect { kNone, kFlipBit, kSkipLastElement, kDependsOnTileOrder, kWrongReason, kNanPayload, kOutOfMemory };

class FakeModule final : public GemmModule {
 public:
  // takes_recipe_weights: Run materializes the weights itself where the case arrives without them
  // (and notes which device materialization it was handed).
  explicit FakeModule(Defect defect, bool takes_recipe_weights = false)
      : defect_(defect), takes_recipe_weights_(takes_recipe_weights) {}
  std::string name() const override { return "fake"; }
  bool TakesRecipeWeights() const override { return takes_recipe_weights_; }
  void UseDeviceWeights(const DeviceCaseWeights& weights) override { handed_.push_back(weights.materialization); }
  // The materializations UseDeviceWeights was handed, one per case.
  const std::vector<size_t>& handed() const { return handed_; }
  std::optional<StepModel> model() const override { return StepModel::kSm90Emulated; }
  CaseRun RunCase(const FuzzCase& c, const LayerAdmission& admission, std::span<uint16_t> output,
                  std::span<uint16_t> again_output) override {
    CaseRun run;
    run.tactic = c.tactic;
    run.expected = ExpectedRoute(c, run.tactic, admission);
    run.route = Run(c, run.tactic, output);
    if (!run.route.ok()) return run;
    run.again_tactic = run.tactic;
    run.again_tactic.swizzle = run.tactic.swizzle == 0 ? 1 : 0;
    run.again = Run(c, run.again_tactic, again_output);
    return run;
  }
  absl::StatusOr<Route> Run(const FuzzCase& given, const Tactic& tactic, std::span<uint16_t> output) override {
    FuzzCase own;
    if ((given.packed_codes.empty() && given.recipe(TensorKind::kCodes)) ||
        (given.scale_bytes.empty() && given.recipe(TensorKind::kScales))) {
      if (!takes_recipe_weights_) return absl::InternalError("handed a case without its weights");
      own = given;
      MaterializeCase(own);
    }
    const FuzzCase& c = own.packed_codes.empty() ? given : own;
    absl::StatusOr<Route> route = ExpectedRoute(c, tactic, AdmitLayer(c.scale_bytes));
    if (!route.ok()) return route;
    if (defect_ == Defect::kOutOfMemory) return absl::ResourceExhaustedError("out of memory (planted)");
    ReferenceOptions options;
    options.model = StepModel::kSm90Emulated;
    options.tactic = tactic;
    std::vector<uint16_t> result;
    if (absl::Status status = ReferenceGemm(c.Problem(), options, result); !status.ok()) return status;
    std::copy(result.begin(), result.end(), output.begin());
    if (output.empty()) return route;
    switch (defect_) {
      case Defect::kNone: break;
      case Defect::kFlipBit: output[output.size() / 2] ^= 1; break;
      case Defect::kSkipLastElement: output.back() = kOutputPoison; break;
      case Defect::kDependsOnTileOrder: if (tactic.swizzle != c.tactic.swizzle) output[0] ^= 1; break;
      case Defect::kWrongReason: route->reason = RouteReason::kFoldedMissing; break;
      case Defect::kNanPayload: output[0] = 0x7E01; break;
      case Defect::kOutOfMemory: break;
    }
    return route;
  }

 private:
  absl::StatusOr<Route> ExpectedRoute(const FuzzCase& c, const Tactic& tactic, const LayerAdmission& admission) const {
    return DecideRoute(registry_, tactic, TransformRequest::kOrdinary, c.policy, admission.admitted,
                       admission.Describe());
  }

  Defect defect_;
  bool takes_recipe_weights_;
  std::vector<size_t> handed_;
  KernelRegistry registry_ = BuiltinKernelRegistry();
};

FuzzCase DecodeShapedCase(uint64_t seed = mxdiff::testing::TestSeed()) {
  FuzzCase c;
  const int rows[] = {2, 0, 3};
  ResizeCase(c, 3, 16, 64, rows);
  c.tactic = Tactic{16, 128, 32, 2, 0};
  c.request = TransformRequest::kOrdinary;
  CaseRng rng(seed);
  for (uint16_t& a : c.activations) a = uint16_t(0x3000 + rng() % 0x0C00);
  for (uint8_t& code : c.packed_codes) code = uint8_t(rng());
  for (uint8_t& raw : c.scale_bytes) raw = uint8_t(118 + rng() % 8);
  return c;
}

const CheckVerdict* Evaluated(Defect defect, CaseEvaluation& evaluation) {
  std::vector<std::unique_ptr<GemmModule>> modules;
  modules.push_back(std::make_unique<FakeModule>(defect));
  GemmDifferential differential(std::move(modules));
  evaluation = differential.Evaluate(DecodeShapedCase());
  return evaluation.FirstFinding();
}

TEST(GemmChecks, ACorrectModulePassesEveryNamedCheck) {
  CaseEvaluation evaluation;
  EXPECT_EQ(Evaluated(Defect::kNone, evaluation), nullptr);
  std::vector<std::string_view> checks;
  for (const CheckVerdict& verdict : evaluation.verdicts) checks.push_back(verdict.check);
  EXPECT_EQ(checks, (std::vector<std::string_view>{"health", "route", "written", "bits", "determinism",
                                                   "cross-module", "cpu-side"}));
  ASSERT_EQ(evaluation.runs.size(), 1u);
  EXPECT_EQ(evaluation.runs[0].output, evaluation.runs[0].reference);
}

// A large case that every loaded module refuses (its tactic is not instantiated, as the rules
// demand) is judged by its routes alone: no CPU reference; with no module loaded the CPU side is
// all that is checked, at any size.
TEST(GemmChecks, ALargeCaseNoModuleRanGetsNoCpuSideCheckUnlessNoneIsLoaded) {
  FuzzCase c;
  const int rows[] = {2};
  ResizeCase(c, 1, 1024, 4096, rows);  // 2^23 multiply-adds
  c.tactic = Tactic{24, 24, 128, 1, 0};
  ASSERT_FALSE(BuiltinKernelRegistry().Has(c.tactic, Transform::kOrdinary));
  auto checks_of = [&c](bool with_module) {
    std::vector<std::unique_ptr<GemmModule>> modules;
    if (with_module) modules.push_back(std::make_unique<FakeModule>(Defect::kNone));
    GemmDifferential differential(std::move(modules));
    std::vector<std::string_view> checks;
    for (const CheckVerdict& verdict : differential.Evaluate(c).verdicts) {
      EXPECT_FALSE(verdict.finding.has_value()) << verdict.finding->signature;
      checks.push_back(verdict.check);
    }
    return checks;
  };
  EXPECT_EQ(checks_of(true), (std::vector<std::string_view>{"health", "route", "cross-module"}));
  EXPECT_EQ(checks_of(false), (std::vector<std::string_view>{"cross-module", "cpu-side"}));
}

TEST(GemmChecks, EachPlantedDefectIsCaughtByItsCheck) {
  const struct {
    Defect defect;
    std::string_view check;
    std::string_view signature_prefix;
  } expected[] = {
      {Defect::kFlipBit, "bits", "mismatch/fake/ordinary/16x128x32/s2/"},
      {Defect::kSkipLastElement, "written", "no-launch/fake/16x128x32/s2"},
      {Defect::kDependsOnTileOrder, "determinism", "nondeterminism/fake/16x128x32/s2"},
      {Defect::kWrongReason, "route", "route/fake/folded-missing-instead-of-ordinary-requested"},
      {Defect::kNanPayload, "bits", "mismatch/fake/ordinary/"},
  };
  for (const auto& e : expected) {
    CaseEvaluation evaluation;
    const CheckVerdict* finding = Evaluated(e.defect, evaluation);
    ASSERT_NE(finding, nullptr) << e.check;
    EXPECT_EQ(finding->check, e.check);
    EXPECT_EQ(finding->module, "fake");
    EXPECT_EQ(finding->finding->signature.rfind(e.signature_prefix, 0), 0u) << finding->finding->signature;
    // Every check ran all the same (the evaluation never stops at a finding).
    std::vector<std::string_view> checks;
    for (const CheckVerdict& verdict : evaluation.verdicts) checks.push_back(verdict.check);
    EXPECT_EQ(checks, (std::vector<std::string_view>{"health", "route", "written", "bits", "determinism",
                                                     "cross-module", "cpu-side"}))
        << e.check;
  }
}

TEST(GemmChecks, EveryModuleAndEveryCheckRunsAndEveryFindingIsKept) {
  std::vector<std::unique_ptr<GemmModule>> modules;
  modules.push_back(std::make_unique<FakeModule>(Defect::kFlipBit));
  modules.push_back(std::make_unique<FakeModule>(Defect::kWrongReason));
  modules.push_back(std::make_unique<FakeModule>(Defect::kDependsOnTileOrder));
  GemmDifferential differential(std::move(modules));
  const CaseEvaluation evaluation = differential.Evaluate(DecodeShapedCase());
  std::vector<std::string> signatures;
  for (const CheckVerdict& verdict : evaluation.verdicts) {
    if (verdict.finding) signatures.push_back(std::string(verdict.check) + " " + verdict.finding->signature);
  }
  ASSERT_EQ(signatures.size(), 3u);
  EXPECT_EQ(signatures[0].rfind("bits mismatch/fake/ordinary/16x128x32/s2/", 0), 0u) << signatures[0];
  EXPECT_EQ(signatures[1], "route route/fake/folded-missing-instead-of-ordinary-requested");
  EXPECT_EQ(signatures[2], "determinism nondeterminism/fake/16x128x32/s2");
  EXPECT_EQ(evaluation.runs.size(), 3u);
  EXPECT_EQ(evaluation.FirstFinding()->finding->signature.rfind("mismatch/fake/", 0), 0u);
  // The unwritten element is `written`'s alone, not also a bits mismatch.
  std::vector<std::unique_ptr<GemmModule>> skipping;
  skipping.push_back(std::make_unique<FakeModule>(Defect::kSkipLastElement));
  GemmDifferential skipped(std::move(skipping));
  size_t findings = 0;
  for (const CheckVerdict& verdict : skipped.Evaluate(DecodeShapedCase()).verdicts) findings += verdict.finding.has_value();
  EXPECT_EQ(findings, 1u);
}

TEST(KnownCases, AreValidAndDeterministic) {
  const std::vector<FuzzCase> cases = KnownCases();
  EXPECT_EQ(cases.size(), size_t(kCtaShapeCount) * 3);
  for (const FuzzCase& c : cases) {
    EXPECT_TRUE(ValidateCase(c).ok()) << ValidateCase(c);
    EXPECT_TRUE(AdmitLayer(c.scale_bytes).admitted);
  }
  EXPECT_EQ(cases, KnownCases());
}

TEST(KnownCases, AKernelThatDisagreesIsAFindingOfTheHarness) {
  std::vector<std::unique_ptr<GemmModule>> modules;
  modules.push_back(std::make_unique<FakeModule>(Defect::kFlipBit));
  GemmDifferential differential(std::move(modules));
  const CheckResult finding = differential.CheckCase(KnownCases().front());
  ASSERT_TRUE(finding.has_value());
  EXPECT_EQ(finding->signature.rfind("mismatch/fake/ordinary/8x128x64/s1/admitted", 0), 0u) << finding->signature;
  // Both sides' bits are in the description.
  EXPECT_NE(finding->description.find("the reference (ordinary sm90-emulated) says 0x"), std::string::npos)
      << finding->description;
}

TEST(ModuleLoader, SelectionFromArgumentsThenEnvironment) {
  setenv("MXDIFF_MODULES", "folded", 1);
  setenv("MXDIFF_EXTERNAL_KERNEL", "/env/lib.so", 1);
  const std::vector<std::string_view> args = {"fuzz_gemm", "-runs=10", "--modules=ordinary,,folded-partial",
                                              "--disable-modules=ext-x", "corpus"};
  const ModuleSelection selection = ModuleSelectionFromArgs(args);
  unsetenv("MXDIFF_MODULES");
  unsetenv("MXDIFF_EXTERNAL_KERNEL");
  EXPECT_EQ(selection.force, (std::vector<std::string>{"ordinary", "folded-partial"}));
  EXPECT_EQ(selection.disable, (std::vector<std::string>{"ext-x"}));
  EXPECT_EQ(selection.external_library, "/env/lib.so");
}

TEST(ModuleLoader, ExternalModuleLoadsAndSelectionNeverDropsSilently) {
  ModuleSelection selection;
  selection.external_library = MXDIFF_EXAMPLE_KERNEL;
  absl::StatusOr<LoadedModules> loaded = LoadModules(selection);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_FALSE(loaded->modules.empty());
  EXPECT_EQ(loaded->modules.back()->name(), "ext-example-reference");

  selection.force = {"external"};
  loaded = LoadModules(selection);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->modules.size(), 1u);

  selection.force = {"no-such-module"};
  EXPECT_EQ(LoadModules(selection).status().code(), absl::StatusCode::kNotFound);

  selection.force = {};
  selection.disable = {"ext-example-reference"};
  loaded = LoadModules(selection);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  for (const auto& module : loaded->modules) EXPECT_NE(module->name(), "ext-example-reference");

  selection.disable = {};
  selection.external_library = "/nonexistent/libkernel.so";
  EXPECT_FALSE(LoadModules(selection).ok());
}

// A stand-in for the device reference (fuzz/modules/reference_oracle.h), computed on the CPU so
// that the oracle's sampling is tested where no GPU exists: correct, with the FakeModule's
// kFlipBit defect planted (a bug the kernel under test shares, which only the CPU sample can
// see), or unable to run.
enum class OracleFault { kNone, kFlipBit, kUnavailable, kOutOfMemory, kCudaError };

class FakeDeviceOracle final : public ReferenceOracle {
 public:
  explicit FakeDeviceOracle(OracleFault fault, int* groups_seen = nullptr) : fault_(fault), groups_seen_(groups_seen) {}
  std::string name() const override { return "fake-device"; }
  absl::Status Gemm(const GroupedProblem& problem, const ReferenceOptions& options,
                    std::vector<uint16_t>& output) override {
    if (groups_seen_ != nullptr) *groups_seen_ = problem.groups;
    if (fault_ == OracleFault::kUnavailable) return absl::UnavailableError("no device (planted)");
    if (fault_ == OracleFault::kOutOfMemory) return absl::ResourceExhaustedError("out of memory (planted)");
    if (fault_ == OracleFault::kCudaError) return absl::InternalError("an illegal address (planted)");
    if (absl::Status status = ReferenceGemm(problem, options, output); !status.ok()) return status;
    if (fault_ == OracleFault::kFlipBit && !output.empty()) output[output.size() / 2] ^= 1;
    return absl::OkStatus();
  }

 private:
  OracleFault fault_;
  int* groups_seen_;
};

GemmDifferential WithOracle(Defect defect, OracleFault fault, int cpu_check_every) {
  std::vector<std::unique_ptr<GemmModule>> modules;
  modules.push_back(std::make_unique<FakeModule>(defect));
  OracleSettings settings;
  settings.device_above_work = 0;  // every case is "large"
  settings.cpu_check_every = cpu_check_every;
  return GemmDifferential(std::move(modules), std::make_unique<FakeDeviceOracle>(fault), settings);
}

std::vector<std::string> Signatures(const CaseEvaluation& evaluation) {
  std::vector<std::string> signatures;
  for (const CheckVerdict& verdict : evaluation.verdicts) {
    if (verdict.finding) signatures.push_back(verdict.finding->signature);
  }
  return signatures;
}

TEST(DeviceOracle, ACorrectOracleJudgesLargeCasesAndTheSampleAgrees) {
  GemmDifferential differential = WithOracle(Defect::kNone, OracleFault::kNone, 1);
  const CaseEvaluation evaluation = differential.Evaluate(DecodeShapedCase());
  EXPECT_EQ(evaluation.FirstFinding(), nullptr);
  std::vector<std::string_view> checks;
  for (const CheckVerdict& verdict : evaluation.verdicts) checks.push_back(verdict.check);
  EXPECT_EQ(checks, (std::vector<std::string_view>{"device-vs-cpu", "health", "route", "written", "bits",
                                                   "determinism", "cross-module"}));
  const DifferentialCounters& counters = differential.counters();
  EXPECT_EQ(counters.cases, 1u);
  EXPECT_EQ(counters.cases_device, 1u);
  EXPECT_EQ(counters.cases_cpu_checked, 1u);
  EXPECT_EQ(counters.cases_cpu, 0u);
  EXPECT_EQ(counters.elements_compared, size_t(5 * 16));
}

TEST(DeviceOracle, APlantedOracleDefectIsCaughtBySamplingAsItsOwnFinding) {
  // The kernel shares the oracle's defect, so only the CPU sample can tell: the sampled cases
  // (and exactly those) give oracle/device-vs-cpu, and the kernel is then judged on the CPU's bits.
  GemmDifferential differential = WithOracle(Defect::kFlipBit, OracleFault::kFlipBit, 4);
  size_t sampled = 0;
  for (uint64_t seed = 1; seed <= 64; ++seed) {
    const FuzzCase c = DecodeShapedCase(seed);
    const bool chosen = CpuCheckSampled(c, 4);
    sampled += chosen;
    const std::vector<std::string> signatures = Signatures(differential.Evaluate(c));
    if (chosen) {
      ASSERT_FALSE(signatures.empty()) << seed;
      EXPECT_EQ(signatures.front(), "oracle/device-vs-cpu") << seed;
      EXPECT_EQ(std::count(signatures.begin(), signatures.end(), "oracle/device-vs-cpu"), 1) << seed;
      ASSERT_EQ(signatures.size(), 2u) << seed;  // the kernel's own defect, judged on the CPU's bits
      EXPECT_EQ(signatures[1].rfind("mismatch/fake/ordinary/", 0), 0u) << signatures[1];
    } else {
      EXPECT_TRUE(signatures.empty()) << seed << ": " << signatures.front();
    }
    EXPECT_EQ(CpuCheckSampled(c, 4), chosen) << "a replay decides the same";
  }
  EXPECT_GT(sampled, 4u);
  EXPECT_LT(sampled, 32u);
  EXPECT_EQ(differential.counters().oracle_disagreements, sampled);
  EXPECT_EQ(differential.counters().cases_cpu_checked, sampled);
  EXPECT_EQ(differential.counters().cases_device, 64u);
}

TEST(DeviceOracle, AKernelIsNeverJudgedOnUnconfirmedDeviceBits) {
  // Not sampled (1 in 1000000), but the correct kernel disagrees with the wrong oracle: the CPU
  // reference decides, and the oracle alone carries the finding.
  GemmDifferential differential = WithOracle(Defect::kNone, OracleFault::kFlipBit, 1000000);
  FuzzCase c = DecodeShapedCase();
  uint64_t seed = 1;
  while (CpuCheckSampled(c, 1000000)) c = DecodeShapedCase(++seed);
  EXPECT_EQ(Signatures(differential.Evaluate(c)), (std::vector<std::string>{"oracle/device-vs-cpu"}));
}

TEST(DeviceOracle, AnOracleThatCannotRunFallsBackToTheCpuAndIsCounted) {
  for (OracleFault fault : {OracleFault::kUnavailable, OracleFault::kOutOfMemory}) {
    GemmDifferential differential = WithOracle(Defect::kFlipBit, fault, 16);
    const CaseEvaluation evaluation = differential.Evaluate(DecodeShapedCase());
    // The check is never skipped: the kernel's defect is still found, on the CPU reference.
    ASSERT_NE(evaluation.FirstFinding(), nullptr);
    EXPECT_EQ(evaluation.FirstFinding()->check, "bits");
    const DifferentialCounters& counters = differential.counters();
    EXPECT_EQ(counters.cases_cpu, 1u);
    EXPECT_EQ(counters.cases_device, 0u);
    EXPECT_EQ(counters.device_fallbacks, fault == OracleFault::kUnavailable ? 1u : 0u);
    EXPECT_EQ(counters.device_refused, fault == OracleFault::kOutOfMemory ? 1u : 0u);
    EXPECT_NE(differential.last_fallback().find("planted"), std::string::npos);
  }
}

TEST(DeviceOracle, AnyOtherOracleErrorIsTheOraclesFindingAndTheCaseStillRunsOnTheCpu) {
  GemmDifferential differential = WithOracle(Defect::kFlipBit, OracleFault::kCudaError, 16);
  const std::vector<std::string> signatures = Signatures(differential.Evaluate(DecodeShapedCase()));
  ASSERT_EQ(signatures.size(), 2u);
  EXPECT_EQ(signatures[0], "oracle/device-error");
  EXPECT_EQ(signatures[1].rfind("mismatch/fake/ordinary/", 0), 0u) << signatures[1];
  EXPECT_EQ(differential.counters().device_fallbacks, 1u);
}

TEST(DeviceOracle, TheOracleIsHandedOnlyTheGroupsWithRowsAndGivesTheSameBits) {
  std::vector<std::unique_ptr<GemmModule>> modules;
  modules.push_back(std::make_unique<FakeModule>(Defect::kNone));
  int groups_seen = 0;
  OracleSettings settings;
  settings.device_above_work = 0;
  settings.cpu_check_every = 1;  // every device result compared with the CPU's on the whole problem
  GemmDifferential differential(std::move(modules),
                                std::make_unique<FakeDeviceOracle>(OracleFault::kNone, &groups_seen), settings);
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    const FuzzCase c = DecodeShapedCase(seed);  // rows 2, 0, 3
    EXPECT_EQ(differential.Evaluate(c).FirstFinding(), nullptr) << seed;
    EXPECT_EQ(groups_seen, 2) << "the empty group is left out";
  }
  EXPECT_EQ(differential.counters().oracle_disagreements, 0u);
  EXPECT_EQ(differential.counters().cases_cpu_checked, 8u);
}

TEST(DeviceOracle, SmallCasesStayOnTheCpu) {
  std::vector<std::unique_ptr<GemmModule>> modules;
  modules.push_back(std::make_unique<FakeModule>(Defect::kNone));
  GemmDifferential differential(std::move(modules), std::make_unique<FakeDeviceOracle>(OracleFault::kFlipBit));
  EXPECT_EQ(differential.Evaluate(DecodeShapedCase()).FirstFinding(), nullptr);
  EXPECT_EQ(differential.counters().cases_cpu, 1u);
  EXPECT_EQ(differential.counters().cases_device, 0u);
  EXPECT_EQ(differential.counters().cases_by_shape[size_t(ShapeClass::kSmall)], 1u);
}

TEST(DeviceOracle, AKernelOutOfDeviceMemoryIsARefusedCaseNotAFinding) {
  std::vector<std::unique_ptr<GemmModule>> modules;
  modules.push_back(std::make_unique<FakeModule>(Defect::kOutOfMemory));
  GemmDifferential differential(std::move(modules));
  EXPECT_EQ(differential.Evaluate(DecodeShapedCase()).FirstFinding(), nullptr);
  EXPECT_EQ(differential.counters().runs_refused, 1u);
}

// The device way (GoesDeviceWay) on the host: a stand-in for the device's materialization of a
// case's recipe weights (from the recipes alone: the case's vectors of codes and scales are
// cleared first) and a stand-in for the device reference that computes on it, optionally with a
// planted defect, counting which entry was used.
struct OracleCalls {
  int host = 0;    // Gemm: the host's tensors
  int recipe = 0;  // GemmOnDeviceWeights: the device's materialization
  int admit = 0;   // DeviceRecipeWeights::Of: the weights (and their admission) asked for on the device
};

class HostStandInWeights final : public DeviceRecipeWeights {
 public:
  // admit_all: a planted defect, every layer admitted; error: Of fails with it.
  HostStandInWeights(OracleCalls* calls, bool admit_all, absl::Status error)
      : calls_(calls), admit_all_(admit_all), error_(std::move(error)) {}
  absl::StatusOr<const DeviceCaseWeights*> Of(const FuzzCase& c) override {
    ++calls_->admit;
    if (!error_.ok()) return error_;
    if (!c.WeightsFromRecipes()) return absl::InvalidArgumentError("the case's weights are not recipes");
    own_ = c;
    own_.packed_codes.clear();
    own_.scale_bytes.clear();
    MaterializeCase(own_);
    view_ = DeviceCaseWeights{nullptr, admit_all_ ? LayerAdmission{} : AdmitLayer(own_.scale_bytes),
                              ++materializations_};
    return &view_;
  }
  size_t materializations() const override { return materializations_; }
  void Forget() override {}
  const FuzzCase& materialized() const { return own_; }

 private:
  OracleCalls* calls_;
  bool admit_all_;
  absl::Status error_;
  FuzzCase own_;
  DeviceCaseWeights view_;
  size_t materializations_ = 0;
};

class MaterializingFakeOracle final : public ReferenceOracle {
 public:
  // device: the stand-in whose weights it reads (null: never asked to); flip: a planted defect,
  // one output bit wrong.
  MaterializingFakeOracle(OracleCalls* calls, const HostStandInWeights* device, bool takes_device_weights = true,
                          bool flip = false)
      : calls_(calls), device_(device), takes_device_weights_(takes_device_weights), flip_(flip) {}
  std::string name() const override { return "fake-device"; }
  absl::Status Gemm(const GroupedProblem& problem, const ReferenceOptions& options,
                    std::vector<uint16_t>& output) override {
    ++calls_->host;
    return ReferenceGemm(problem, options, output);
  }
  bool TakesDeviceWeights() const override { return takes_device_weights_; }
  absl::Status GemmOnDeviceWeights(const GroupedProblem& rows, const DeviceCaseWeights& weights,
                                   const ReferenceOptions& options, std::vector<uint16_t>& output) override {
    ++calls_->recipe;
    if (weights.materialization != device_->materializations()) return absl::InternalError("stale weights");
    GroupedProblem problem = rows;
    problem.packed_codes = device_->materialized().packed_codes;
    problem.scale_bytes = device_->materialized().scale_bytes;
    if (absl::Status status = ReferenceGemm(problem, options, output); !status.ok()) return status;
    if (flip_ && !output.empty()) output[output.size() / 2] ^= 1;
    return absl::OkStatus();
  }

 private:
  OracleCalls* calls_;
  const HostStandInWeights* device_;
  bool takes_device_weights_, flip_;
};

// A differential over `modules` with the stand-ins of the device's weights and reference.
GemmDifferential WithFakeDevice(std::vector<std::unique_ptr<GemmModule>> modules, OracleCalls* calls,
                                OracleSettings settings = {}, bool flip = false, bool admit_all = false,
                                absl::Status error = absl::OkStatus()) {
  auto device = std::make_unique<HostStandInWeights>(calls, admit_all, std::move(error));
  auto oracle = std::make_unique<MaterializingFakeOracle>(calls, device.get(), true, flip);
  return GemmDifferential(std::move(modules), std::move(oracle), settings, std::move(device));
}

// DecodeShapedCase with its codes and scales from recipes (an override among the codes).
FuzzCase RecipeWeightsCase(uint64_t seed = mxdiff::testing::TestSeed()) {
  FuzzCase c = DecodeShapedCase(seed);
  c.recipe(TensorKind::kCodes) = TensorRecipe{ValueClass::kUniform, 0, seed * 3 + 1, {{5, 7}}};
  c.recipe(TensorKind::kScales) = TensorRecipe{ValueClass::kCheckpoint, 0, seed * 5 + 2, {}};
  MaterializeCase(c);
  return c;
}

GemmDifferential WithMaterializingOracle(OracleCalls* calls, Defect defect, int cpu_check_every, bool flip = false) {
  std::vector<std::unique_ptr<GemmModule>> modules;
  modules.push_back(std::make_unique<FakeModule>(defect));
  OracleSettings settings;
  settings.device_above_work = 0;  // every case is "large"
  settings.cpu_check_every = cpu_check_every;
  return WithFakeDevice(std::move(modules), calls, settings, flip);
}

TEST(DeviceWay, WhichCasesGoTheDeviceWay) {
  OracleCalls calls;
  MaterializingFakeOracle materializing(&calls, nullptr), host_only(&calls, nullptr, /*takes_device_weights=*/false);
  OracleSettings large;
  large.device_above_work = 0;
  const FuzzCase recipes = RecipeWeightsCase();
  EXPECT_TRUE(GoesDeviceWay(recipes, large, &materializing));
  EXPECT_FALSE(GoesDeviceWay(recipes, large, &host_only)) << "an oracle that takes host tensors only";
  EXPECT_FALSE(GoesDeviceWay(recipes, large, nullptr)) << "no device oracle";
  EXPECT_FALSE(GoesDeviceWay(recipes, OracleSettings{}, &materializing)) << "a small case stays on the CPU";
  OracleSettings cpu_only = large;
  cpu_only.cpu_check_every = 0;
  EXPECT_FALSE(GoesDeviceWay(recipes, cpu_only, &materializing)) << "--cpu-check-every=0";
  EXPECT_FALSE(GoesDeviceWay(DecodeShapedCase(), large, &materializing)) << "literal bytes";
  FuzzCase codes_only = recipes;
  codes_only.recipe(TensorKind::kScales).reset();
  EXPECT_FALSE(GoesDeviceWay(codes_only, large, &materializing)) << "literal scale bytes";
  FuzzCase scales_only = recipes;
  scales_only.recipe(TensorKind::kCodes).reset();
  EXPECT_FALSE(GoesDeviceWay(scales_only, large, &materializing)) << "literal codes";
  EXPECT_EQ(calls.host + calls.recipe, 0) << "deciding computes nothing";
}

TEST(DeviceWay, LargeRecipeCasesAreJudgedOnTheOraclesOwnMaterializationWithTheSameBits) {
  OracleCalls calls;
  GemmDifferential differential = WithMaterializingOracle(&calls, Defect::kNone, 1);  // every one on the CPU too
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    const CaseEvaluation evaluation = differential.Evaluate(RecipeWeightsCase(seed));
    EXPECT_EQ(evaluation.FirstFinding(), nullptr) << seed << ": " << evaluation.FirstFinding()->finding->signature;
  }
  EXPECT_GT(calls.recipe, 0);
  EXPECT_EQ(calls.host, 0) << "the host's tensors were handed to the oracle";
  const DifferentialCounters& counters = differential.counters();
  EXPECT_EQ(counters.cases_device, 8u);
  EXPECT_EQ(counters.cases_device_materialized, 8u);
  EXPECT_EQ(counters.cases_cpu_checked, 8u);
  EXPECT_EQ(counters.oracle_disagreements, 0u);
  EXPECT_NE(CountersText(counters).find("\ndevice_materialized 8\n"), std::string::npos) << CountersText(counters);
}

// One routed row among 256 experts at W13's shape: 2^22 multiply-adds, but 2^30 weights that the
// host would materialize (512 MB of codes) for a CPU reference. Such cases were among the "small"
// ones on which an H100 campaign spent 82.6% of its workers' time (5 Dec).
TEST(DeviceWay, ALayerOfManyExpertsGoesTheDeviceWayWhateverItsRows) {
  FuzzCase c;  // the description alone: nothing materialized
  c.groups = 256;
  c.n = 1024;
  c.k = 4096;
  c.row_offsets.assign(257, 0);
  for (int g = 87; g <= 256; ++g) c.row_offsets[g] = 1;  // group 86 has the one row
  c.recipe(TensorKind::kCodes) = TensorRecipe{ValueClass::kUniform, 0, 1, {}};
  c.recipe(TensorKind::kScales) = TensorRecipe{ValueClass::kCheckpoint, 0, 2, {}};
  const OracleSettings defaults;
  ASSERT_EQ(double(c.rows()) * c.n * c.k, defaults.device_above_work) << "not above in multiply-adds";
  OracleCalls calls;
  MaterializingFakeOracle materializing(&calls, nullptr);
  EXPECT_TRUE(AboveDeviceWork(c, defaults));
  EXPECT_TRUE(GoesDeviceWay(c, defaults, &materializing));
  EXPECT_EQ(ShapeClassOf(c), ShapeClass::kDecode);
  const FuzzCase small = DecodeShapedCase();
  EXPECT_FALSE(AboveDeviceWork(small, defaults));
  EXPECT_EQ(ShapeClassOf(small), ShapeClass::kSmall);
  c.row_offsets.assign(257, 0);
  EXPECT_FALSE(AboveDeviceWork(c, defaults)) << "no rows: where such a case always went";
  EXPECT_EQ(ShapeClassOf(c), ShapeClass::kSmall) << "no rows: not a decode step";
}

TEST(DeviceWay, AnInputsSecondsAndItsPhasesGoToItsCasesShapeClass) {
  OracleCalls calls;
  GemmDifferential differential = WithMaterializingOracle(&calls, Defect::kNone, 16);
  const FuzzCase small = DecodeShapedCase();
  ASSERT_EQ(ShapeClassOf(small), ShapeClass::kSmall);
  PhaseSeconds before = differential.counters().seconds;
  differential.decode_seconds() += 0.125;
  differential.AddCaseSeconds(small, 0.25, before);
  before = differential.counters().seconds;
  differential.AddCaseSeconds(small, 0.5, before);
  const std::string text = CountersText(differential.counters());
  EXPECT_NE(text.find("\nshape_seconds_small 0.750\nshape_seconds_decode 0.000\nshape_seconds_huge 0.000\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\nshape_phase_seconds_small_decode 0.125\nshape_phase_seconds_small_admission 0.000\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\nshape_phase_seconds_decode_decode 0.000\n"), std::string::npos) << text;
}

TEST(DeviceWay, LiteralWeightsAndSmallCasesKeepTheirPaths) {
  OracleCalls calls;
  GemmDifferential differential = WithMaterializingOracle(&calls, Defect::kNone, 16);
  EXPECT_EQ(differential.Evaluate(DecodeShapedCase()).FirstFinding(), nullptr);
  EXPECT_GT(calls.host, 0);
  EXPECT_EQ(calls.recipe, 0);
  EXPECT_EQ(differential.counters().cases_device, 1u);
  EXPECT_EQ(differential.counters().cases_device_materialized, 0u);

  OracleCalls small_calls;
  std::vector<std::unique_ptr<GemmModule>> modules;
  modules.push_back(std::make_unique<FakeModule>(Defect::kNone));
  GemmDifferential small = WithFakeDevice(std::move(modules), &small_calls);
  EXPECT_EQ(small.Evaluate(RecipeWeightsCase()).FirstFinding(), nullptr);
  EXPECT_EQ(small_calls.host + small_calls.recipe, 0);
  EXPECT_EQ(small.counters().cases_cpu, 1u);
  EXPECT_EQ(small.counters().cases_device_materialized, 0u);
}

TEST(DeviceWay, APlantedDefectOfTheDeviceWayIsCaughtBySamplingAsItsOwnFinding) {
  OracleCalls calls;
  GemmDifferential differential = WithMaterializingOracle(&calls, Defect::kFlipBit, 4, /*flip=*/true);
  size_t sampled = 0;
  for (uint64_t seed = 1; seed <= 64; ++seed) {
    const FuzzCase c = RecipeWeightsCase(seed);
    const bool chosen = CpuCheckSampled(c, 4);
    sampled += chosen;
    const std::vector<std::string> signatures = Signatures(differential.Evaluate(c));
    if (chosen) {
      ASSERT_EQ(signatures.size(), 2u) << seed;
      EXPECT_EQ(signatures[0], "oracle/device-vs-cpu") << seed;
      EXPECT_EQ(signatures[1].rfind("mismatch/fake/ordinary/", 0), 0u) << signatures[1];
    } else {
      EXPECT_TRUE(signatures.empty()) << seed << ": " << signatures.front();
    }
  }
  EXPECT_GT(sampled, 4u);
  EXPECT_EQ(differential.counters().oracle_disagreements, sampled);
  EXPECT_EQ(differential.counters().cases_device_materialized, 64u);
  EXPECT_EQ(calls.host, 0);
}

// The host skips the weights of every device-way case (NeedsHostWeights, DecodeForDifferential);
// the sampled ones materialize the groups with rows for the CPU check; the verdicts and bits are
// those of the fully materialized case.
GemmDifferential Skipping(OracleCalls* calls, Defect defect, int cpu_check_every, bool module_takes_recipe_weights,
                          bool admit_all = false) {
  std::vector<std::unique_ptr<GemmModule>> modules;
  modules.push_back(std::make_unique<FakeModule>(defect, module_takes_recipe_weights));
  OracleSettings settings;
  settings.device_above_work = 0;
  settings.cpu_check_every = cpu_check_every;
  return WithFakeDevice(std::move(modules), calls, settings, /*flip=*/false, admit_all);
}

std::vector<uint8_t> Encoded(const FuzzCase& c) {
  absl::StatusOr<std::vector<uint8_t>> bytes = EncodeCase(c);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : std::vector<uint8_t>{};
}

TEST(DeviceWay, TheHostSkipsTheWeightsAndTheSampleMaterializesTheGroupsWithRows) {
  OracleCalls calls, full_calls;
  GemmDifferential skipping = Skipping(&calls, Defect::kNone, 4, true);
  GemmDifferential full = Skipping(&full_calls, Defect::kNone, 4, true);
  FuzzCase c;
  MaterializationMemo memo;
  size_t skipped = 0, sampled = 0;
  for (uint64_t seed = 1; seed <= 64; ++seed) {
    const std::vector<uint8_t> bytes = Encoded(RecipeWeightsCase(seed));
    const absl::StatusOr<bool> skip = DecodeForDifferential(bytes, skipping, c, &memo);
    ASSERT_TRUE(skip.ok()) << skip.status();
    EXPECT_TRUE(*skip) << seed;
    EXPECT_EQ(c.packed_codes.empty(), *skip) << seed;
    EXPECT_EQ(c.scale_bytes.empty(), *skip) << seed;
    EXPECT_EQ(c.activations.size(), size_t(c.rows()) * size_t(c.k));
    skipped += *skip;
    sampled += CpuCheckSampled(bytes, 4);
    const absl::StatusOr<FuzzCase> whole = DecodeCase(bytes);
    ASSERT_TRUE(whole.ok());
    const CaseEvaluation a = skipping.Evaluate(c, bytes), b = full.Evaluate(*whole);
    EXPECT_EQ(Signatures(a), Signatures(b)) << seed;
    EXPECT_EQ(a.FirstFinding(), nullptr) << seed;
    ASSERT_EQ(a.runs.size(), b.runs.size());
    for (size_t i = 0; i < a.runs.size(); ++i) {
      EXPECT_EQ(a.runs[i].output, b.runs[i].output) << seed;
      EXPECT_EQ(a.runs[i].reference, b.runs[i].reference) << seed;
    }
  }
  EXPECT_EQ(skipped, 64u);
  EXPECT_GT(sampled, 4u);
  EXPECT_LT(sampled, 32u);
  EXPECT_EQ(skipping.counters().host_weights_skipped, skipped);
  EXPECT_EQ(skipping.counters().host_weights_late, sampled) << "a correct kernel needs no other CPU reference";
  EXPECT_EQ(skipping.counters().cases_cpu_checked, sampled);
  EXPECT_EQ(skipping.counters().oracle_disagreements, 0u);
  EXPECT_EQ(calls.admit, 64) << "every layer admitted by the oracle (no two cases share their scales)";
  EXPECT_EQ(full.counters().host_weights_skipped, 0u);
  EXPECT_NE(CountersText(skipping.counters()).find("\nhost_weights_skipped " + std::to_string(skipped) + "\n"),
            std::string::npos);
}

// fuzz_gemm decodes an input once (DecodeForDifferential: the fields, then what the case needs
// materialized) and samples it by its bytes: for every input the encoder wrote (every corpus file)
// that is the sample of the decoded case, so fuzz_gemm, repro and the replays choose the same.
TEST(DeviceWay, TheSampleIsAFunctionOfTheInputsBytesAndEqualsTheDecodedCases) {
  OracleCalls calls;
  GemmDifferential skipping = Skipping(&calls, Defect::kNone, 4, true);
  FuzzCase c;
  MaterializationMemo memo;
  size_t sampled = 0;
  for (uint64_t seed = 1; seed <= 64; ++seed) {
    const std::vector<uint8_t> bytes = Encoded(RecipeWeightsCase(seed));
    const absl::StatusOr<FuzzCase> whole = DecodeCase(bytes);
    ASSERT_TRUE(whole.ok());
    const bool chosen = CpuCheckSampled(bytes, 4);
    EXPECT_EQ(chosen, CpuCheckSampled(*whole, 4)) << seed;
    sampled += chosen;
    const size_t checked_before = skipping.counters().cases_cpu_checked;
    ASSERT_TRUE(DecodeForDifferential(bytes, skipping, c, &memo).ok());
    EXPECT_EQ(skipping.Evaluate(c, bytes).FirstFinding(), nullptr) << seed;
    EXPECT_EQ(skipping.counters().cases_cpu_checked - checked_before, size_t(chosen)) << seed;
  }
  EXPECT_GT(sampled, 4u);
  EXPECT_LT(sampled, 32u);
}

// The one decode with a memo across inputs (the fuzz loop's buffers): each case equals the
// input's full decode, as a generator is kept and its overrides move.
TEST(DeviceWay, DecodingOnceWithTheMemoGivesTheFullDecode) {
  std::vector<std::unique_ptr<GemmModule>> modules;
  modules.push_back(std::make_unique<FakeModule>(Defect::kNone));
  GemmDifferential host_only(std::move(modules));  // no device oracle: every weight on the host
  FuzzCase c;
  MaterializationMemo memo;
  FuzzCase base = RecipeWeightsCase(7);
  for (uint32_t step = 0; step < 8; ++step) {
    base.recipe(TensorKind::kScales)->overrides = {{step * 3, uint16_t(120 + step)}};
    base.recipe(TensorKind::kCodes)->overrides = {{step, uint16_t(step % 16)}};
    if (step == 5) base.recipe(TensorKind::kCodes)->seed += 1;  // a new generator midway
    base.packed_codes.clear();
    base.scale_bytes.clear();
    MaterializeCase(base);
    const std::vector<uint8_t> bytes = Encoded(base);
    const absl::StatusOr<bool> skipped = DecodeForDifferential(bytes, host_only, c, &memo);
    ASSERT_TRUE(skipped.ok()) << skipped.status();
    EXPECT_FALSE(*skipped);
    const absl::StatusOr<FuzzCase> whole = DecodeCase(bytes);
    ASSERT_TRUE(whole.ok());
    EXPECT_TRUE(c == *whole) << step;
  }
}

// The oracle's admission is trusted only as far as the host's agrees on the sampled cases: one
// that admits every layer is a finding on each sampled case with refused scales, and the routes
// are then judged on the host's verdict.
TEST(DeviceWay, AnOracleAdmissionThatDisagreesWithTheHostIsAFindingOnTheSampledCases) {
  OracleCalls calls;
  GemmDifferential lying = Skipping(&calls, Defect::kNone, 4, true, /*admit_all=*/true);
  FuzzCase c;
  size_t sampled_refused = 0, unsampled = 0;
  for (uint64_t seed = 1; seed <= 64; ++seed) {
    FuzzCase refused = RecipeWeightsCase(seed);
    refused.recipe(TensorKind::kScales)->overrides.push_back({3, 0});  // raw 0: refused
    refused.scale_bytes.clear();
    MaterializeCase(refused);
    const std::vector<uint8_t> bytes = Encoded(refused);
    ASSERT_TRUE(DecodeForDifferential(bytes, lying, c, nullptr).ok());
    const std::vector<std::string> signatures = Signatures(lying.Evaluate(c, bytes));
    if (CpuCheckSampled(bytes, 4)) {
      ++sampled_refused;
      ASSERT_FALSE(signatures.empty()) << seed;
      EXPECT_EQ(signatures[0], "oracle/device-vs-cpu/admission") << seed;
    } else {
      ++unsampled;
    }
  }
  EXPECT_GT(sampled_refused, 4u);
  EXPECT_GT(unsampled, 4u);
  EXPECT_EQ(lying.counters().oracle_disagreements, sampled_refused);
}

// A device that cannot materialize the weights (out of device memory, or any other error) leaves
// the admission to the host and the reference to the CPU: the same verdicts, counted as a refused
// case or a fallback, and asked once per case although the admission and the reference both wanted it.
TEST(DeviceWay, ADeviceThatCannotMaterializeLeavesTheAdmissionToTheHost) {
  for (const absl::Status& error : {absl::ResourceExhaustedError("out of memory (planted)"),
                                    absl::UnavailableError("no device (planted)")}) {
    OracleCalls calls, full_calls;
    std::vector<std::unique_ptr<GemmModule>> modules;
    modules.push_back(std::make_unique<FakeModule>(Defect::kNone));  // on the host's weights
    OracleSettings settings;
    settings.device_above_work = 0;
    settings.cpu_check_every = 1000000;
    GemmDifferential failing = WithFakeDevice(std::move(modules), &calls, settings, false, false, error);
    GemmDifferential full = Skipping(&full_calls, Defect::kNone, 1000000, true);
    FuzzCase c;
    for (uint64_t seed = 1; seed <= 8; ++seed) {
      FuzzCase refused = RecipeWeightsCase(seed);
      if (seed % 2 == 0) refused.recipe(TensorKind::kScales)->overrides.push_back({3, 0});  // raw 0: refused
      refused.scale_bytes.clear();
      MaterializeCase(refused);
      ASSERT_TRUE(DecodeForDifferential(Encoded(refused), failing, c, nullptr).ok());
      EXPECT_EQ(Signatures(failing.Evaluate(c)), Signatures(full.Evaluate(refused))) << seed << " " << error;
    }
    const bool out_of_memory = error.code() == absl::StatusCode::kResourceExhausted;
    EXPECT_EQ(failing.counters().device_refused, out_of_memory ? 8u : 0u) << error;
    EXPECT_EQ(failing.counters().device_fallbacks, out_of_memory ? 0u : 8u) << error;
    EXPECT_EQ(failing.counters().cases_cpu, 8u) << error;
    EXPECT_EQ(calls.admit, 8);
    EXPECT_EQ(calls.recipe, 0);
  }
}

// One device materialization per case, asked for once (CaseWeights::OnDevice) and handed to the
// kernel module (its run and its determinism rerun) and the oracle alike, which the admission reads too.
TEST(DeviceWay, TheKernelsAndTheOracleShareOneMaterializationAskedForOncePerCase) {
  OracleCalls calls;
  GemmDifferential skipping = Skipping(&calls, Defect::kNone, 1000000, true);
  const auto& module = static_cast<const FakeModule&>(*skipping.modules()[0]);
  FuzzCase c;
  std::vector<size_t> handed;
  for (size_t seed = 1; seed <= 8; ++seed) {
    const absl::StatusOr<bool> skip = DecodeForDifferential(Encoded(RecipeWeightsCase(seed)), skipping, c, nullptr);
    ASSERT_TRUE(skip.ok());
    ASSERT_TRUE(*skip) << "the device way, the weights skipped on the host";
    const int references_before = calls.recipe;
    const CaseEvaluation evaluation = skipping.Evaluate(c);
    EXPECT_EQ(evaluation.FirstFinding(), nullptr) << seed;
    EXPECT_EQ(calls.admit, int(seed)) << "asked for once per case";
    EXPECT_GT(calls.recipe, references_before) << "the oracle computed on it (a stale one is an error)";
    handed.push_back(seed);  // once for the run and the rerun, this case's materialization
    EXPECT_EQ(module.handed(), handed);
  }
  EXPECT_EQ(skipping.weights().device_materializations(), 8u);
}

TEST(DeviceWay, TheWeightsStayOnTheHostWhereAnythingElseNeedsThem) {
  OracleCalls calls;
  const FuzzCase recipes = RecipeWeightsCase();
  FuzzCase c;
  // A module that does not take recipe codes (an external one, the builtin kernels for now).
  EXPECT_TRUE(Skipping(&calls, Defect::kNone, 1000000, false).NeedsHostWeights(recipes));
  GemmDifferential skipping = Skipping(&calls, Defect::kNone, 1000000, true);
  EXPECT_FALSE(skipping.NeedsHostWeights(recipes));
  EXPECT_TRUE(skipping.NeedsHostWeights(DecodeShapedCase())) << "literal bytes";
  EXPECT_FALSE(Skipping(&calls, Defect::kNone, 1, true).NeedsHostWeights(recipes))
      << "every case sampled: the groups with rows come later";
  std::vector<std::unique_ptr<GemmModule>> modules;
  modules.push_back(std::make_unique<FakeModule>(Defect::kNone, true));
  GemmDifferential small = WithFakeDevice(std::move(modules), &calls);
  EXPECT_TRUE(small.NeedsHostWeights(recipes)) << "a small case is judged on the CPU";
  const absl::StatusOr<bool> skip = DecodeForDifferential(Encoded(recipes), small, c, nullptr);
  ASSERT_TRUE(skip.ok());
  EXPECT_FALSE(*skip);
  EXPECT_EQ(c, recipes);
}

TEST(DeviceWay, AKernelDisagreeingOnASkippedCaseIsJudgedOnTheCpuReferenceAfterAll) {
  OracleCalls calls;
  GemmDifferential differential = Skipping(&calls, Defect::kFlipBit, 1000000, true);
  uint64_t seed = 1;
  while (CpuCheckSampled(RecipeWeightsCase(seed), 1000000)) ++seed;
  FuzzCase c;
  const absl::StatusOr<bool> skip =
      DecodeForDifferential(Encoded(RecipeWeightsCase(seed)), differential, c, nullptr);
  ASSERT_TRUE(skip.ok());
  ASSERT_TRUE(*skip);
  const std::vector<std::string> signatures = Signatures(differential.Evaluate(c));
  ASSERT_EQ(signatures.size(), 1u);
  EXPECT_EQ(signatures[0].rfind("mismatch/fake/ordinary/", 0), 0u) << signatures[0];
  EXPECT_EQ(differential.counters().host_weights_late, 1u);
  EXPECT_EQ(differential.counters().host_weights_skipped, 1u);
  EXPECT_EQ(differential.counters().cases_cpu_checked, 1u) << "confirmed on the CPU before the kernel is judged";
}

// Nested phase timers count each second once: the inner phase's, with the outer clock stopped.
TEST(PhaseTimer, ANestedTimerStopsTheOuterOnesClock) {
  double outer = 0, inner = 0;
  const auto started = std::chrono::steady_clock::now();
  {
    PhaseTimer outer_timer(outer);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    {
      PhaseTimer inner_timer(inner);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_GE(inner, 0.020);
  EXPECT_GE(outer, 0.004);
  EXPECT_LE(outer + inner, total) << "outer " << outer << " s, inner " << inner << " s, in " << total << " s";
}

TEST(DeviceOracle, ShapeClasses) {
  FuzzCase c;
  std::vector<int> rows(256, 0);
  for (int g = 0; g < 6; ++g) rows[g * 40] = 1;
  ResizeCase(c, 256, 512, 4096, rows);  // W13 at TP8, top-6 of 256 experts
  EXPECT_EQ(ShapeClassOf(c), ShapeClass::kDecode);
  rows[7] = 9;  // a seventh expert with rows
  ResizeCase(c, 256, 512, 4096, rows);
  EXPECT_EQ(ShapeClassOf(c), ShapeClass::kHuge);
  const int one[] = {1};
  ResizeCase(c, 1, 256, 4096, one);
  EXPECT_EQ(ShapeClassOf(c), ShapeClass::kSmall);
}

}  // namespace
}  // namespace mxdiff::fuzz

namespace mxdiff::fuzz {
namespace {

TEST(CaseMinimizer, ShrinksAFindingAndKeepsItsSignature) {
  std::vector<std::unique_ptr<GemmModule>> modules;
  modules.push_back(std::make_unique<FakeModule>(Defect::kFlipBit));
  GemmDifferential differential(std::move(modules));
  const FuzzCase start = DecodeShapedCase();
  const std::string signature = differential.CheckCase(start)->signature;
  const MinimizeResult result = MinimizeCase(start, [&](const FuzzCase& c) {
    const CheckResult finding = differential.CheckCase(c);
    return finding && finding->signature == signature;
  });
  EXPECT_GT(result.accepted, 0);
  EXPECT_FALSE(result.exhausted);
  const FuzzCase& m = result.minimized;
  EXPECT_EQ(differential.CheckCase(m)->signature, signature);
  EXPECT_LT(size_t(m.rows()) * size_t(m.n) * size_t(m.k), size_t(start.rows()) * size_t(start.n) * size_t(start.k));
  EXPECT_EQ(m.groups, 1) << DescribeCase(m);
}

}  // namespace
}  // namespace mxdiff::fuzz
