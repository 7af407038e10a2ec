// GemmRunner::PrepareAudited with verdicts of a real audit (the fixtures of write_fixtures.py):
// the audit's own verdict is accepted and gives the same admission as Prepare; a stale, moved or
// contradicting verdict is refused before anything is prepared. Skips where no GPU exists.
#include <cstdlib>
#include <random>
#include <string>

#include "gtest/gtest.h"
#include "tests/kernels/gpu_fixture.h"
#include "checkpoint/audit.h"
#include "checkpoint/layer_verdicts.h"

namespace mxdiff::testing {
namespace {

using checkpoint::AuditResult;
using checkpoint::KernelLayer;

// The GPU machine runs a carried build in another folder: MXDIFF_AUDIT_FIXTURES there names
// where the fixtures were carried.
std::string FixturesDir() {
  const char* carried = std::getenv("MXDIFF_AUDIT_FIXTURES");
  return carried != nullptr && *carried != '\0' ? carried : MXDIFF_AUDIT_FIXTURES;
}

class PrepareAuditedTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    result_ = checkpoint::RunAudit({FixturesDir() + "/deepseek"}, checkpoint::AuditOptions{});
    ASSERT_TRUE(result_.errors.empty()) << result_.errors.front().message;
    absl::StatusOr<std::vector<AuditedLayerVerdict>> verdicts = checkpoint::ReadLayerVerdicts(checkpoint::JsonReport(result_));
    ASSERT_TRUE(verdicts.ok()) << verdicts.status();
    verdicts_ = *std::move(verdicts);
    std::vector<std::string> files;
    for (const checkpoint::CheckpointFile& file : result_.checkpoint.files) files.push_back(file.path);
    source_ = std::make_unique<checkpoint::MappedFiles>(files);
  }
  std::vector<uint8_t> ScaleBytes(const KernelLayer& layer) {
    absl::StatusOr<std::vector<uint8_t>> bytes = checkpoint::ReadLayerScaleBytes(result_.checkpoint, result_.plan, layer, *source_);
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    return bytes.ok() ? *bytes : std::vector<uint8_t>();
  }
  std::vector<uint8_t> Codes(const KernelLayer& layer) {
    std::mt19937 rng(7);
    std::vector<uint8_t> codes(size_t(layer.groups) * layer.n * (layer.k / 2));
    for (uint8_t& c : codes) c = uint8_t(rng());
    return codes;
  }
  AuditResult result_;
  std::vector<AuditedLayerVerdict> verdicts_;
  std::unique_ptr<checkpoint::MappedFiles> source_;
};

TEST_F(PrepareAuditedTest, AcceptsTheAuditsVerdictAndAgreesWithPrepare) {
  int checked = 0;
  for (size_t i = 0; i < result_.plan.layers.size(); ++i) {
    const KernelLayer& layer = result_.plan.layers[i];
    if (layer.groups == 0) continue;  // structurally refused: nothing the kernels could prepare
    const std::vector<uint8_t> scales = ScaleBytes(layer), codes = Codes(layer);
    auto audited = runner().PrepareAudited(layer.groups, layer.n, layer.k, codes, scales, verdicts_[i]);
    ASSERT_TRUE(audited.ok()) << layer.name << ": " << audited.status();
    auto plain = runner().Prepare(layer.groups, layer.n, layer.k, codes, scales);
    ASSERT_TRUE(plain.ok()) << plain.status();
    EXPECT_EQ((*audited)->admission().admitted, verdicts_[i].admitted) << layer.name;
    EXPECT_EQ((*audited)->admission().admitted, (*plain)->admission().admitted) << layer.name;
    ++checked;
  }
  EXPECT_EQ(checked, 15);  // 16 layers, one refused for its shapes
}

TEST_F(PrepareAuditedTest, RefusesStaleMovedAndContradictingVerdicts) {
  const KernelLayer* refused = nullptr;
  size_t index = 0;
  for (size_t i = 0; i < result_.plan.layers.size(); ++i) {
    if (result_.plan.layers[i].name == "layers.1.ffn.experts.W13") refused = &result_.plan.layers[index = i];
  }
  ASSERT_NE(refused, nullptr);
  const std::vector<uint8_t> scales = ScaleBytes(*refused), codes = Codes(*refused);
  const int g = refused->groups, n = refused->n, k = refused->k;

  AuditedLayerVerdict stale = verdicts_[index];
  stale.rule_version += "-old";
  EXPECT_EQ(runner().PrepareAudited(g, n, k, codes, scales, stale).status().code(),
            absl::StatusCode::kFailedPrecondition);

  AuditedLayerVerdict contradicting = verdicts_[index];
  contradicting.admitted = true;  // the bytes hold a raw 112
  const auto status = runner().PrepareAudited(g, n, k, codes, scales, contradicting).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("contradicts"), absl::string_view::npos) << status;

  const AuditedLayerVerdict& other = verdicts_[(index + 2) % verdicts_.size()];  // another layer's
  EXPECT_FALSE(runner().PrepareAudited(g, n, k, codes, scales, other).ok());
}

}  // namespace
}  // namespace mxdiff::testing
