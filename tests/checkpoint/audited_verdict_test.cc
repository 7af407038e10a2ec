// The admission rule's version and CheckAuditedVerdict (reference/admission.h): the checks the
// kernels' prepare step applies to an audit's verdict.
#include <random>
#include <set>

#include "gtest/gtest.h"
#include "reference/admission.h"
#include "tests/reference/test_seed.h"

namespace mxdiff {
namespace {

TEST(AdmissionRuleVersion, NamesTheRuleAndTheDerivedSet) {
  const std::string& version = AdmissionRuleVersion();
  EXPECT_EQ(version.rfind("fold-bitwise-equal-all-codes/113..128/fnv1a64:", 0), 0u) << version;
  EXPECT_EQ(version.size(), std::string("fold-bitwise-equal-all-codes/113..128/fnv1a64:").size() + 16);
  EXPECT_EQ(version, AdmissionRuleVersionOf(FoldAdmittedBytes()));
}

TEST(AdmissionRuleVersion, ChangesWithAnyEntryOfTheTable) {
  std::set<std::string> versions = {AdmissionRuleVersion()};
  for (int raw = 0; raw < 256; ++raw) {
    std::array<bool, 256> changed = FoldAdmittedBytes();
    changed[raw] = !changed[raw];
    versions.insert(AdmissionRuleVersionOf(changed));
  }
  EXPECT_EQ(versions.size(), 257u);  // every single flip gives a version of its own
}

TEST(ScaleHistogram, RefusedCountAgreesWithAdmitLayer) {
  std::mt19937_64 rng(testing::TestSeed());
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<uint8_t> bytes(rng() % 3000);
    const int lo = int(rng() % 256), width = 1 + int(rng() % 40);
    for (uint8_t& b : bytes) b = uint8_t(std::min(255, lo + int(rng() % width)));
    const ScaleHistogram histogram = HistogramOf(bytes);
    uint64_t total = 0;
    for (uint64_t count : histogram) total += count;
    EXPECT_EQ(total, bytes.size());
    EXPECT_EQ(RefusedCount(histogram), AdmitLayer(bytes).refused_count);
  }
}

class CheckAuditedVerdictTest : public ::testing::Test {
 protected:
  // A 2 x 4 x 64 layer (16 scale bytes), admitted or with one byte replaced.
  std::vector<uint8_t> Bytes(int replaced_raw = -1) {
    std::vector<uint8_t> bytes = {113, 114, 120, 128, 126, 115, 119, 120, 121, 122, 123, 124, 125, 116, 117, 118};
    if (replaced_raw >= 0) bytes[5] = uint8_t(replaced_raw);
    return bytes;
  }
  AuditedLayerVerdict VerdictOf(const std::vector<uint8_t>& bytes) {
    AuditedLayerVerdict verdict;
    verdict.rule_version = AdmissionRuleVersion();
    verdict.layer = "layers.0.ffn.experts.W13";
    verdict.admitted = RefusedCount(HistogramOf(bytes)) == 0;
    verdict.groups = 2;
    verdict.n = 4;
    verdict.k = 64;
    verdict.histogram = HistogramOf(bytes);
    return verdict;
  }
};

TEST_F(CheckAuditedVerdictTest, AcceptsAMatchingVerdictAdmittedOrRefused) {
  EXPECT_TRUE(CheckAuditedVerdict(VerdictOf(Bytes()), 2, 4, 64, Bytes()).ok());
  EXPECT_TRUE(CheckAuditedVerdict(VerdictOf(Bytes(112)), 2, 4, 64, Bytes(112)).ok());
  EXPECT_FALSE(VerdictOf(Bytes(112)).admitted);
}

TEST_F(CheckAuditedVerdictTest, RefusesAStaleRuleVersion) {
  AuditedLayerVerdict verdict = VerdictOf(Bytes());
  verdict.rule_version = "fold-bitwise-equal-all-codes/113..127/fnv1a64:0000000000000000";
  const absl::Status status = CheckAuditedVerdict(verdict, 2, 4, 64, Bytes());
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("stale"), absl::string_view::npos) << status;
  EXPECT_NE(status.message().find(AdmissionRuleVersion()), absl::string_view::npos) << status;
  EXPECT_NE(status.message().find("layers.0.ffn.experts.W13"), absl::string_view::npos) << status;
}

TEST_F(CheckAuditedVerdictTest, RefusesAVerdictForAnotherShape) {
  const absl::Status status = CheckAuditedVerdict(VerdictOf(Bytes()), 1, 8, 64, Bytes());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("groups 2 x N 4 x K 64"), absl::string_view::npos) << status;
}

TEST_F(CheckAuditedVerdictTest, RefusesAVerdictForOtherBytesEvenIfBothAreAdmitted) {
  // Raw 115 -> 127: both admitted, but the verdict was not made on these bytes.
  const absl::Status status = CheckAuditedVerdict(VerdictOf(Bytes()), 2, 4, 64, Bytes(127));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("does not describe these scale bytes"), absl::string_view::npos) << status;
  EXPECT_NE(status.message().find("raw 115"), absl::string_view::npos) << status;
}

TEST_F(CheckAuditedVerdictTest, RefusesAVerdictThatContradictsTheRule) {
  AuditedLayerVerdict admitted_but_112 = VerdictOf(Bytes(112));
  admitted_but_112.admitted = true;
  absl::Status status = CheckAuditedVerdict(admitted_but_112, 2, 4, 64, Bytes(112));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("contradicts"), absl::string_view::npos) << status;
  EXPECT_NE(status.message().find("1 scale bytes outside 113..128"), absl::string_view::npos) << status;

  AuditedLayerVerdict refused_but_clean = VerdictOf(Bytes());
  refused_but_clean.admitted = false;
  status = CheckAuditedVerdict(refused_but_clean, 2, 4, 64, Bytes());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("contradicts"), absl::string_view::npos) << status;
}

}  // namespace
}  // namespace mxdiff
