// What ran and why: refused layers, missing folded kernels, fail-closed errors, and bad input
// rejected before any launch with the output untouched.
#include <random>
#include <vector>

#include "fmt/core.h"
#include "gtest/gtest.h"
#include "kernels/builtin_kernels.h"
#include "reference/reference_gemm.h"
#include "tests/kernels/gpu_fixture.h"
#include "tests/kernels/random_layer.h"

namespace mxdiff::testing {
namespace {

constexpr uint16_t kSentinel = 0x7E01;
constexpr Tactic kTactic{.cta_m = 16, .cta_n = 128, .cta_k = 32, .splits = 3, .swizzle = 1};

std::vector<uint16_t> OrdinaryReference(const RandomLayer& layer, const Tactic& tactic) {
  std::vector<uint16_t> expected;
  EXPECT_TRUE(ReferenceGemm(layer.problem(),
                            ReferenceOptions{.transform = Transform::kOrdinary,
                                             .model = StepModel::kSm90Emulated,
                                             .tactic = tactic},
                            expected)
                  .ok());
  return expected;
}

bool Untouched(const std::vector<uint16_t>& output) {
  for (uint16_t value : output) {
    if (value != kSentinel) return false;
  }
  return true;
}

class GemmRouteTest : public GpuTest {
 protected:
  // An admitted layer with one scale byte replaced by `raw`.
  RandomLayer LayerWithOneByte(std::mt19937_64& rng, uint8_t raw) {
    const std::vector<int> rows = {2, 5, 1};
    RandomLayer layer = MakeRandomLayer(rng, 160, 256, rows, ScaleBytes::kAdmitted);
    layer.scales[rng() % layer.scales.size()] = raw;
    return layer;
  }
};

TEST_F(GemmRouteTest, RefusedLayerFallsBackToOrdinaryAndSaysSo) {
  std::mt19937_64 rng(TestSeed("GemmRouteTest.Refused"));
  for (uint8_t raw : {uint8_t(112), uint8_t(129)}) {
    const RandomLayer layer = LayerWithOneByte(rng, raw);
    absl::StatusOr<std::unique_ptr<PreparedLayer>> prepared = Prepare(layer);
    ASSERT_TRUE(prepared.ok()) << prepared.status();
    EXPECT_FALSE((*prepared)->admission().admitted);
    for (TransformRequest request : {TransformRequest::kAuto, TransformRequest::kFolded}) {
      std::vector<uint16_t> output(size_t(layer.rows()) * layer.n, kSentinel);
      absl::StatusOr<Route> route = runner().Run(**prepared, layer.row_offsets, layer.activations, output,
                                                 RunRequest{.transform = request, .tactic = kTactic});
      ASSERT_TRUE(route.ok()) << route.status();
      EXPECT_EQ(route->variant, Transform::kOrdinary);
      EXPECT_EQ(route->reason, RouteReason::kLayerRefused);
      EXPECT_NE(route->detail.find(fmt::format("{}", raw)), std::string::npos) << route->detail;
      EXPECT_EQ(DescribeMismatch(OrdinaryReference(layer, kTactic), output, layer.n), "");
    }
  }
}

TEST_F(GemmRouteTest, FailClosedFoldedOnARefusedLayerIsAnErrorAndWritesNothing) {
  std::mt19937_64 rng(TestSeed("GemmRouteTest.FailClosed"));
  const RandomLayer layer = LayerWithOneByte(rng, 129);
  absl::StatusOr<std::unique_ptr<PreparedLayer>> prepared = Prepare(layer);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  std::vector<uint16_t> output(size_t(layer.rows()) * layer.n, kSentinel);
  absl::StatusOr<Route> route = runner().Run(
      **prepared, layer.row_offsets, layer.activations, output,
      RunRequest{.transform = TransformRequest::kFolded, .policy = FallbackPolicy::kFailClosed, .tactic = kTactic});
  EXPECT_EQ(route.status().code(), absl::StatusCode::kFailedPrecondition) << route.status();
  EXPECT_TRUE(Untouched(output));
}

TEST_F(GemmRouteTest, MissingFoldedKernelFallsBackToOrdinaryNeverToNoLaunch) {
  KernelRegistry ordinary_only;
  for (const CtaShape& shape : kCtaShapes) {
    ordinary_only.Add(Tactic{.cta_m = shape.m, .cta_n = shape.n, .cta_k = shape.k}, Transform::kOrdinary);
  }
  absl::StatusOr<std::unique_ptr<GemmRunner>> subset = GemmRunner::CreateWithRegistry(0, ordinary_only);
  ASSERT_TRUE(subset.ok()) << subset.status();
  EXPECT_EQ((*subset)->registry().size(), size_t(kCtaShapeCount));
  std::mt19937_64 rng(TestSeed("GemmRouteTest.FoldedMissing"));
  const std::vector<int> rows = {6, 1};
  const RandomLayer layer = MakeRandomLayer(rng, 300, 512, rows, ScaleBytes::kAdmitted);
  absl::StatusOr<std::unique_ptr<PreparedLayer>> prepared =
      (*subset)->Prepare(layer.groups, layer.n, layer.k, layer.codes, layer.scales);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  ASSERT_TRUE((*prepared)->admission().admitted);
  std::vector<uint16_t> output(size_t(layer.rows()) * layer.n, kSentinel);
  absl::StatusOr<Route> route = (*subset)->Run(**prepared, layer.row_offsets, layer.activations, output,
                                               RunRequest{.transform = TransformRequest::kFolded, .tactic = kTactic});
  ASSERT_TRUE(route.ok()) << route.status();
  EXPECT_EQ(route->variant, Transform::kOrdinary);
  EXPECT_EQ(route->reason, RouteReason::kFoldedMissing);
  EXPECT_EQ(DescribeMismatch(OrdinaryReference(layer, kTactic), output, layer.n), "");

  std::vector<uint16_t> untouched(output.size(), kSentinel);
  absl::StatusOr<Route> refused = (*subset)->Run(
      **prepared, layer.row_offsets, layer.activations, untouched,
      RunRequest{.transform = TransformRequest::kFolded, .policy = FallbackPolicy::kFailClosed, .tactic = kTactic});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Untouched(untouched));
}

TEST_F(GemmRouteTest, CreateWithRegistryRejectsKernelsTheBuildLacks) {
  KernelRegistry unbuilt;
  unbuilt.Add(Tactic{.cta_m = 8, .cta_n = 64, .cta_k = 32}, Transform::kOrdinary);
  EXPECT_EQ(GemmRunner::CreateWithRegistry(0, unbuilt).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(GemmRouteTest, BadLayersAreRejectedAtPrepare) {
  const std::vector<uint8_t> codes(2 * 64 * 48 / 2);
  const std::vector<uint8_t> scales(2 * 64 * 48 / 32 + 1);
  EXPECT_EQ(runner().Prepare(2, 64, 48, codes, scales).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(runner().Prepare(2, 64, 0, {}, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(runner().Prepare(0, 64, 64, {}, {}).status().code(), absl::StatusCode::kInvalidArgument);
  const std::vector<uint8_t> short_codes(64 * 64 / 2 - 1);
  const std::vector<uint8_t> good_scales(64 * 64 / 32);
  EXPECT_EQ(runner().Prepare(1, 64, 64, short_codes, good_scales).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(GemmRouteTest, BadRunsAreRejectedBeforeAnyLaunchWithTheOutputUntouched) {
  std::mt19937_64 rng(TestSeed("GemmRouteTest.BadRuns"));
  const std::vector<int> rows = {3, 2};
  const RandomLayer layer = MakeRandomLayer(rng, 100, 128, rows, ScaleBytes::kAdmitted);
  absl::StatusOr<std::unique_ptr<PreparedLayer>> prepared = Prepare(layer);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  const size_t outputs = size_t(layer.rows()) * layer.n;
  auto expect_rejected = [&](std::span<const int32_t> offsets, std::span<const uint16_t> activations,
                             size_t output_size, const RunRequest& request, const char* what) {
    std::vector<uint16_t> output(output_size, kSentinel);
    absl::StatusOr<Route> route = runner().Run(**prepared, offsets, activations, output, request);
    EXPECT_EQ(route.status().code(), absl::StatusCode::kInvalidArgument) << what << ": " << route.status();
    EXPECT_FALSE(route.status().message().empty()) << what;
    EXPECT_TRUE(Untouched(output)) << what;
  };
  const RunRequest good{.tactic = kTactic};
  const std::vector<int32_t> too_few = {0, 3};
  const std::vector<int32_t> descending = {0, 3, 2};
  expect_rejected(too_few, layer.activations, outputs, good, "row offsets size");
  expect_rejected(descending, layer.activations, outputs, good, "descending offsets");
  expect_rejected(layer.row_offsets, std::span(layer.activations).first(layer.activations.size() - 1), outputs,
                  good, "short activations");
  expect_rejected(layer.row_offsets, layer.activations, outputs + 1, good, "long output");
  expect_rejected(layer.row_offsets, layer.activations, outputs,
                  RunRequest{.tactic = Tactic{.cta_m = 8, .cta_n = 64, .cta_k = 32}}, "unbuilt tactic");
  expect_rejected(layer.row_offsets, layer.activations, outputs,
                  RunRequest{.tactic = Tactic{.cta_m = 16, .cta_n = 128, .cta_k = 32, .splits = 0}}, "zero splits");
  expect_rejected(layer.row_offsets, layer.activations, outputs,
                  RunRequest{.tactic = Tactic{.cta_m = 16, .cta_n = 128, .cta_k = 32, .swizzle = 12}},
                  "swizzle out of range");

  // A layer no CUDA runner prepared is refused. (One a runner of the same device prepared runs
  // on any other: LayersRunOnAnyRunnerOfTheirDevice.)
  class ForeignLayer final : public PreparedLayer {
   public:
    explicit ForeignLayer(const PreparedLayer& like) : like_(like) {}
    int groups() const override { return like_.groups(); }
    int n() const override { return like_.n(); }
    int k() const override { return like_.k(); }
    const LayerAdmission& admission() const override { return like_.admission(); }

   private:
    const PreparedLayer& like_;
  };
  std::vector<uint16_t> output(outputs, kSentinel);
  EXPECT_EQ(runner().Run(ForeignLayer(**prepared), layer.row_offsets, layer.activations, output, good).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Untouched(output));

  const DeviceBatch null_batch{.row_offsets = layer.row_offsets};
  EXPECT_EQ(runner().RunOnDevice(**prepared, null_batch, good).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(runner().CheckDevice().ok());
}

// fuzz_gemm's modules share one copy of each case's layer between the full registry's runner and
// the partial one: the same bits from either.
TEST_F(GemmRouteTest, LayersRunOnAnyRunnerOfTheirDevice) {
  std::mt19937_64 rng(TestSeed("GemmRouteTest.LayersRunOnAnyRunnerOfTheirDevice"));
  const std::vector<int> rows = {3, 2};
  const RandomLayer layer = MakeRandomLayer(rng, 160, 256, rows, ScaleBytes::kAdmitted);
  absl::StatusOr<std::unique_ptr<PreparedLayer>> prepared = Prepare(layer);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  absl::StatusOr<std::unique_ptr<GemmRunner>> other = GemmRunner::Create();
  ASSERT_TRUE(other.ok()) << other.status();
  const size_t outputs = size_t(layer.rows()) * layer.n;
  std::vector<uint16_t> mine(outputs, kSentinel), theirs(outputs, kSentinel);
  const RunRequest request{.tactic = kTactic};
  ASSERT_TRUE(runner().Run(**prepared, layer.row_offsets, layer.activations, mine, request).ok());
  ASSERT_TRUE((*other)->Run(**prepared, layer.row_offsets, layer.activations, theirs, request).ok());
  EXPECT_FALSE(Untouched(mine));
  EXPECT_EQ(mine, theirs);
}

TEST_F(GemmRouteTest, NoRowsIsAnEmptyResultNotAnError) {
  std::mt19937_64 rng(TestSeed("GemmRouteTest.NoRows"));
  const std::vector<int> rows = {0, 0, 0};
  const RandomLayer layer = MakeRandomLayer(rng, 64, 64, rows, ScaleBytes::kAdmitted);
  absl::StatusOr<std::unique_ptr<PreparedLayer>> prepared = Prepare(layer);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  std::vector<uint16_t> output;
  absl::StatusOr<Route> route = runner().Run(**prepared, layer.row_offsets, layer.activations, output, RunRequest{});
  ASSERT_TRUE(route.ok()) << route.status();
  EXPECT_EQ(route->variant, Transform::kFolded);
}

}  // namespace
}  // namespace mxdiff::testing
