// The one device-layer preparation policy (kernels/admitted_scales.h) on the CPU: which
// transforms a verdict prepares, and that AdmittedScales admits each byte once, expert by expert,
// with the same verdicts as AdmitLayer.
#include "kernels/admitted_scales.h"

#include <vector>

#include "gtest/gtest.h"
#include "kernels/moe_layer_plan.h"
#include "reference/scale_class.h"

namespace mxdiff {
namespace {

TEST(AdmittedScalesTest, TheOrdinaryScalesAlwaysTheFoldedOnlyWhenAdmitted) {
  const RawRange range = ScaleClassRange(ScaleClass::kAdmitted);
  const LayerAdmission admitted = AdmitLayer(std::vector<uint8_t>{range.first, 127, range.last});
  const LayerAdmission refused = AdmitLayer(std::vector<uint8_t>{127, 200});
  ASSERT_TRUE(admitted.admitted);
  ASSERT_FALSE(refused.admitted);
  EXPECT_TRUE(PreparesTransform(Transform::kOrdinary, admitted));
  EXPECT_TRUE(PreparesTransform(Transform::kOrdinary, refused));
  EXPECT_TRUE(PreparesTransform(Transform::kFolded, admitted));
  EXPECT_FALSE(PreparesTransform(Transform::kFolded, refused));
}

TEST(AdmittedScalesTest, AdmitsEachByteOnceExpertByExpertAsAdmitLayerDoes) {
  std::vector<uint8_t> bytes(50, 127);
  bytes[3] = 7;    // expert 0 refused
  bytes[27] = 250;  // expert 2 refused
  bytes[28] = 0;
  const uint64_t before = AdmittedByteCount();
  const AdmittedScales scales = AdmittedScales::Admit(bytes, 12);  // experts of 12, the last of 2
  EXPECT_EQ(AdmittedByteCount() - before, bytes.size()) << "every byte admitted exactly once";
  ASSERT_EQ(scales.experts().size(), 5u);
  EXPECT_EQ(scales.per_expert(), 12u);
  for (size_t e = 0; e < 5; ++e) {
    const std::span<const uint8_t> expert = std::span(bytes).subspan(e * 12, e < 4 ? 12 : 2);
    EXPECT_EQ(scales.expert_bytes(e).data(), expert.data());
    EXPECT_EQ(scales.expert_bytes(e).size(), expert.size());
    EXPECT_EQ(scales.experts()[e].admitted, AdmitLayer(expert).admitted) << e;
  }
  const LayerAdmission whole = AdmitLayer(bytes);
  EXPECT_FALSE(scales.layer().admitted);
  EXPECT_EQ(scales.layer().refused_count, whole.refused_count);
  EXPECT_EQ(scales.layer().Describe(), whole.Describe());
}

TEST(AdmittedScalesTest, ZeroOrOversizedExpertsAreTheWholeLayer) {
  const std::vector<uint8_t> bytes(40, 127);
  for (size_t per : {size_t(0), size_t(40), size_t(1000)}) {
    const AdmittedScales scales = AdmittedScales::Admit(bytes, per);
    EXPECT_EQ(scales.experts().size(), 1u);
    EXPECT_EQ(scales.per_expert(), 40u);
    EXPECT_TRUE(scales.layer().admitted);
  }
  EXPECT_TRUE(AdmittedScales::Admit({}, 16).experts().empty());
}

TEST(AdmittedScalesTest, MoeScalesPerExpertIsNTimesKOver32) {
  const MoeShape shape{.hidden = 64, .intermediate = 96, .experts = 4, .top_k = 2, .shared_expert = true};
  EXPECT_EQ(MoeScalesPerExpert(shape, MoeGemm::kW13), size_t(2 * 96) * 64 / 32);
  EXPECT_EQ(MoeScalesPerExpert(shape, MoeGemm::kW2), size_t(64) * 96 / 32);
}

}  // namespace
}  // namespace mxdiff
