// Output bits of every tactic x variant x split count against the reference under the
// sm90-emulated step model (docs/numerics.md: one m8n8k4 step), on random and real decode shapes.
#include <map>
#include <random>
#include <tuple>
#include <vector>

#include "fmt/core.h"
#include "gtest/gtest.h"
#include "kernels/builtin_kernels.h"
#include "reference/decode_shapes.h"
#include "reference/reference_gemm.h"
#include "reference/split_plan.h"
#include "tests/kernels/gpu_fixture.h"
#include "tests/kernels/random_layer.h"

namespace mxdiff::testing {
namespace {

// The host copy's fill: a NaN no kernel writes (NaNs come out canonical 0x7FFF), and on purpose
// not the device poison kRunnerOutputPoison, so an element Run never copied back (0x7E01) tells
// itself apart from one no kernel wrote (0xFFFF).
constexpr uint16_t kPoison = 0x7E01;

std::vector<uint16_t> Reference(const RandomLayer& layer, Transform transform, const Tactic& tactic) {
  std::vector<uint16_t> expected;
  const absl::Status status = ReferenceGemm(
      layer.problem(), ReferenceOptions{.transform = transform, .model = StepModel::kSm90Emulated, .tactic = tactic},
      expected);
  EXPECT_TRUE(status.ok()) << status;
  return expected;
}

class GemmBitsTest : public GpuTest {
 protected:
  // Runs `transform` fail-closed with `tactic`; checks the route and returns the output.
  std::vector<uint16_t> RunExactly(const PreparedLayer& prepared, const RandomLayer& layer, Transform transform,
                                   const Tactic& tactic) {
    std::vector<uint16_t> output(size_t(layer.rows()) * layer.n, kPoison);
    const RunRequest request{.transform = transform == Transform::kOrdinary ? TransformRequest::kOrdinary
                                                                            : TransformRequest::kFolded,
                             .policy = FallbackPolicy::kFailClosed,
                             .tactic = tactic};
    absl::StatusOr<Route> route = runner().Run(prepared, layer.row_offsets, layer.activations, output, request);
    EXPECT_TRUE(route.ok()) << route.status();
    if (route.ok()) {
      EXPECT_EQ(route->variant, transform);
      EXPECT_EQ(route->tactic, tactic);
    }
    return output;
  }
};

TEST_F(GemmBitsTest, RandomShapesEveryTacticVariantAndSplitCount) {
  std::mt19937_64 rng(TestSeed("GemmBitsTest.RandomShapes"));
  int swizzle = 0;
  for (const CtaShape& shape : kCtaShapes) {
    for (Transform transform : {Transform::kOrdinary, Transform::kFolded}) {
      for (int splits : {1, 2, 3, 7, 64}) {
        const int groups = 1 + int(rng() % 4);
        std::vector<int> rows(groups);
        for (int& r : rows) r = int(rng() % (2 * shape.m + 4));
        rows[rng() % groups] += 1;  // at least one row
        const int n = 1 + int(rng() % 300);
        const int k = kBlockK * (1 + int(rng() % 24));
        // Ordinary sees every scale byte and special activations; folded needs an admitted layer.
        const RandomLayer layer =
            MakeRandomLayer(rng, n, k, rows,
                            transform == Transform::kOrdinary ? ScaleBytes::kWide : ScaleBytes::kAdmitted,
                            transform == Transform::kOrdinary ? 0.001 : 0.0);
        const Tactic tactic{.cta_m = shape.m, .cta_n = shape.n, .cta_k = shape.k, .splits = splits,
                            .swizzle = swizzle++ % 3};
        SCOPED_TRACE(fmt::format("{} {} groups {} M {} N {} K {}", TransformName(transform), TacticName(tactic),
                                 groups, layer.rows(), n, k));
        absl::StatusOr<std::unique_ptr<PreparedLayer>> prepared =
            runner().Prepare(groups, n, k, layer.codes, layer.scales);
        ASSERT_TRUE(prepared.ok()) << prepared.status();
        const std::vector<uint16_t> got = RunExactly(**prepared, layer, transform, tactic);
        const std::vector<uint16_t> expected = Reference(layer, transform, tactic);
        EXPECT_EQ(DescribeMismatch(expected, got, n), "");
        if (layer.rows() * n >= 64) {
          EXPECT_GT(DistinctValues(got), 8u);
        }
      }
    }
  }
}

TEST_F(GemmBitsTest, RealDecodeShapesEveryTacticBothVariantsOrdinaryEqualsFolded) {
  std::mt19937_64 rng(TestSeed("GemmBitsTest.RealDecodeShapes"));
  const std::vector<int> six_rows(kDecodeTopK, 1);
  for (const DecodeShape& real : kDecodeShapes) {
    const RandomLayer layer = MakeRandomLayer(rng, real.n, real.k, six_rows, ScaleBytes::kAdmitted);
    absl::StatusOr<std::unique_ptr<PreparedLayer>> prepared = Prepare(layer);
    ASSERT_TRUE(prepared.ok()) << prepared.status();
    ASSERT_TRUE((*prepared)->admission().admitted);
    const int table_splits = runner().DefaultTactic(layer.n, layer.k, layer.row_offsets).splits;
    // The bits depend on the split partition only: one reference per (chunk, effective splits).
    std::map<std::pair<int, int>, std::vector<uint16_t>> references;
    for (const CtaShape& shape : kCtaShapes) {
      for (int splits : {1, 3, table_splits}) {
        const Tactic tactic{.cta_m = shape.m, .cta_n = shape.n, .cta_k = shape.k, .splits = splits};
        SCOPED_TRACE(fmt::format("{} {}", real.name, TacticName(tactic)));
        const std::vector<uint16_t> ordinary = RunExactly(**prepared, layer, Transform::kOrdinary, tactic);
        const std::vector<uint16_t> folded = RunExactly(**prepared, layer, Transform::kFolded, tactic);
        const std::pair key{split_chunk_k(shape.k), effective_splits(layer.k, shape.k, splits)};
        if (!references.contains(key)) references[key] = Reference(layer, Transform::kOrdinary, tactic);
        EXPECT_EQ(DescribeMismatch(references[key], ordinary, layer.n), "");
        EXPECT_EQ(DescribeMismatch(ordinary, folded, layer.n), "") << "ordinary != folded on an admitted layer";
        EXPECT_GT(DistinctValues(ordinary), 100u);
      }
    }
  }
}

TEST_F(GemmBitsTest, DefaultTacticAutoRunsFoldedAndMatchesTheReference) {
  std::mt19937_64 rng(TestSeed("GemmBitsTest.DefaultTactic"));
  const std::vector<int> rows = {3, 0, 40, 1};
  const RandomLayer layer = MakeRandomLayer(rng, 200, 320, rows, ScaleBytes::kAdmitted);
  absl::StatusOr<std::unique_ptr<PreparedLayer>> prepared = Prepare(layer);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  std::vector<uint16_t> output(size_t(layer.rows()) * layer.n, kPoison);
  absl::StatusOr<Route> route = runner().Run(**prepared, layer.row_offsets, layer.activations, output, RunRequest{});
  ASSERT_TRUE(route.ok()) << route.status();
  EXPECT_EQ(route->variant, Transform::kFolded);
  EXPECT_EQ(route->reason, RouteReason::kFoldedAdmitted);
  EXPECT_EQ(DescribeMismatch(Reference(layer, Transform::kFolded, route->tactic), output, layer.n), "");
}

// Split-K workspace reuse: a launch with many tiles after launches with few must not mistake
// the earlier partials for semaphores (it hung once), and the reverse must not either.
TEST_F(GemmBitsTest, SplitKWorkspaceIsReusedAcrossTileCounts) {
  std::mt19937_64 rng(TestSeed("GemmBitsTest.WorkspaceReuse"));
  const Tactic tactic{.cta_m = 16, .cta_n = 128, .cta_k = 32, .splits = 4};
  for (int n : {128, 4096, 256, 8192, 128}) {
    const std::vector<int> rows = {5, 16, 3};
    const RandomLayer layer = MakeRandomLayer(rng, n, 256, rows, ScaleBytes::kAdmitted);
    absl::StatusOr<std::unique_ptr<PreparedLayer>> prepared = Prepare(layer);
    ASSERT_TRUE(prepared.ok()) << prepared.status();
    SCOPED_TRACE(fmt::format("N {}", n));
    EXPECT_EQ(DescribeMismatch(Reference(layer, Transform::kOrdinary, tactic),
                               RunExactly(**prepared, layer, Transform::kOrdinary, tactic), n),
              "");
  }
}

TEST_F(GemmBitsTest, RepeatedRunsAreBitIdentical) {
  std::mt19937_64 rng(TestSeed("GemmBitsTest.Repeated"));
  const std::vector<int> rows(6, 1);
  const RandomLayer layer = MakeRandomLayer(rng, 1024, 4096, rows, ScaleBytes::kWide, 0.0005);
  absl::StatusOr<std::unique_ptr<PreparedLayer>> prepared = Prepare(layer);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  const Tactic tactic{.cta_m = 8, .cta_n = 128, .cta_k = 64, .splits = 16, .swizzle = 2};
  const std::vector<uint16_t> first = RunExactly(**prepared, layer, Transform::kOrdinary, tactic);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(DescribeMismatch(first, RunExactly(**prepared, layer, Transform::kOrdinary, tactic), layer.n), "");
  }
  EXPECT_TRUE(runner().CheckDevice().ok());
}

}  // namespace
}  // namespace mxdiff::testing
