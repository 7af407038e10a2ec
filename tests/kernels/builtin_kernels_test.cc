#include "kernels/builtin_kernels.h"

#include "gtest/gtest.h"

namespace mxdiff {
namespace {

TEST(BuiltinKernelsTest, RegistersEveryShapeForBothTransforms) {
  const KernelRegistry registry = BuiltinKernelRegistry();
  EXPECT_EQ(registry.size(), 2u * kCtaShapeCount);
  EXPECT_EQ(kCtaShapeCount, 4);
  for (const CtaShape& shape : kCtaShapes) {
    const Tactic tactic{.cta_m = shape.m, .cta_n = shape.n, .cta_k = shape.k};
    EXPECT_TRUE(registry.Has(tactic, Transform::kOrdinary)) << TacticName(tactic);
    EXPECT_TRUE(registry.Has(tactic, Transform::kFolded)) << TacticName(tactic);
  }
}

TEST(BuiltinKernelsTest, HasTheShapesTheIssueRequires) {
  for (const auto& [m, n, k] : {std::tuple{8, 128, 64}, {16, 128, 32}, {32, 128, 32}, {64, 128, 32}}) {
    EXPECT_GE(CtaShapeIndex(Tactic{.cta_m = m, .cta_n = n, .cta_k = k}), 0) << m << "x" << n << "x" << k;
  }
}

TEST(BuiltinKernelsTest, ShapeIndexRejectsUnbuiltShapes) {
  EXPECT_EQ(CtaShapeIndex(Tactic{.cta_m = 8, .cta_n = 64, .cta_k = 32}), -1);
  EXPECT_EQ(CtaShapeIndex(Tactic{.cta_m = 16, .cta_n = 128, .cta_k = 64}), -1);
  EXPECT_EQ(CtaShapeIndex(Tactic{.cta_m = 64, .cta_n = 128, .cta_k = 32, .splits = 7}), 3);
}

}  // namespace
}  // namespace mxdiff
