// fuzz_layer's harness on the CPU: the layer case format (strict, every corpus file decodes and
// encodes back to the same bytes), the mutator (only valid cases, within its profile, seeded
// runs repeat), and the CPU side of the property over the corpus.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "fuzz/formats/layer_case_format.h"
#include "fuzz/mutators/layer_mutator.h"
#include "fuzz/checks/layer_target.h"
#include "fuzz/mutators/mutation_sequence.h"
#include "gtest/gtest.h"
#include "reference/admission.h"

namespace mxdiff::fuzz {
namespace {

namespace fs = std::filesystem;

std::vector<std::vector<uint8_t>> CorpusCases() {
  std::vector<std::vector<uint8_t>> cases;
  for (const auto& entry : fs::directory_iterator(fs::path(MXDIFF_CORPUS_DIR) / "fuzz_layer")) {
    std::ifstream in(entry.path(), std::ios::binary);
    cases.emplace_back((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  return cases;
}

TEST(LayerCaseFormat, EveryCorpusCaseRoundTrips) {
  const std::vector<std::vector<uint8_t>> cases = CorpusCases();
  ASSERT_GE(cases.size(), 10u);
  for (const std::vector<uint8_t>& bytes : cases) {
    absl::StatusOr<LayerCase> c = DecodeLayerCase(bytes);
    ASSERT_TRUE(c.ok()) << c.status();
    absl::StatusOr<std::vector<uint8_t>> again = EncodeLayerCase(*c);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(*again, bytes);
  }
}

TEST(LayerCaseFormat, DecodingIsStrictAndNamesTheField) {
  const std::vector<uint8_t> bytes = CorpusCases().front();
  std::vector<uint8_t> bad = bytes;
  bad.push_back(0);
  EXPECT_EQ(DecodeLayerCase(bad).status().message().substr(0, 16), "1 trailing bytes");
  bad = bytes;
  bad.pop_back();
  EXPECT_NE(DecodeLayerCase(bad).status().message().find("truncated"), std::string::npos);
  bad = bytes;
  bad[5] = 48;  // hidden = 48: not a multiple of 32
  bad[6] = 0;
  EXPECT_EQ(DecodeLayerCase(bad).status().message(), "hidden = 48 is not a multiple of 32");
  bad = bytes;
  bad[9] = 17;  // experts
  EXPECT_EQ(DecodeLayerCase(bad).status().message(), "experts = 17 at byte 9 is outside 1..16");
  bad = bytes;
  bad[0] = 'X';
  EXPECT_FALSE(DecodeLayerCase(bad).ok());
  LayerCase c = *DecodeLayerCase(bytes);
  c.replays[0].weights.pop_back();
  EXPECT_FALSE(EncodeLayerCase(c).ok()) << "an invalid case must never be written";
}

TEST(LayerMutator, ProducesOnlyValidCasesWithinItsProfile) {
  std::vector<uint8_t> buffer(1 << 20);
  std::vector<uint8_t> seed = CorpusCases().front();
  std::copy(seed.begin(), seed.end(), buffer.begin());
  size_t size = seed.size();
  int shapes = 0;
  std::set<std::string> names;
  for (unsigned i = 0; i < 300; ++i) {
    size = MutateEncodedLayerCase(buffer.data(), size, buffer.size(), i, kLayerProfile);
    ASSERT_GT(size, 0u);
    absl::StatusOr<LayerCase> c = DecodeLayerCase(std::span<const uint8_t>(buffer.data(), size));
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_LE(c->shape.hidden, kLayerProfile.max_hidden);
    EXPECT_LE(c->shape.experts, kLayerProfile.max_experts);
    EXPECT_LE(int(c->replays.size()), kLayerProfile.max_replays);
    shapes += c->shape.hidden != 64 ? 1 : 0;
    const std::string sequence = MutationSequenceOf(std::span<const uint8_t>(buffer.data(), size));
    EXPECT_FALSE(sequence.empty()) << "the mutations that produced mutation " << i;
    for (std::string_view name : LayerMutationNames()) {
      if (sequence.find(name) != std::string::npos) names.insert(std::string(name));
    }
  }
  EXPECT_GT(shapes, 0);
  EXPECT_EQ(names.size(), LayerMutationNames().size()) << "every named mutation is drawn in 300";
  // Garbage becomes a valid case; the same seed gives the same case.
  std::vector<uint8_t> a(1 << 20, 0xAB), b(1 << 20, 0xAB);
  const size_t na = MutateEncodedLayerCase(a.data(), 100, a.size(), 7, kLayerProfile);
  const size_t nb = MutateEncodedLayerCase(b.data(), 100, b.size(), 7, kLayerProfile);
  ASSERT_EQ(na, nb);
  EXPECT_TRUE(std::equal(a.begin(), a.begin() + na, b.begin()));
  EXPECT_TRUE(DecodeLayerCase(std::span<const uint8_t>(a.data(), na)).ok());
}

TEST(LayerTarget, CpuSideOfTheCorpusAndOfMutatedCases) {
  LayerDifferential differential(/*use_device=*/false);
  for (const std::vector<uint8_t>& bytes : CorpusCases()) {
    const CheckResult finding = differential.CheckCase(*DecodeLayerCase(bytes));
    EXPECT_FALSE(finding.has_value()) << finding->signature << ": " << finding->description;
  }
  CaseRng rng(20261203);
  for (int i = 0; i < 40; ++i) {
    const LayerCase c = RandomLayerCase(rng, kLayerProfile);
    const CheckResult finding = differential.CheckCase(c);
    EXPECT_FALSE(finding.has_value()) << finding->signature << ": " << finding->description << "\n"
                                      << DescribeLayerCase(c);
  }
}

// The scale bytes a case holds: its initial arrays and each replay's new ones, each once.
size_t DistinctScaleBytes(const LayerCase& c) {
  size_t bytes = c.w13_scales.size() + c.w2_scales.size();
  for (const LayerReplay& x : c.replays) {
    bytes += (x.new_w13_scales ? x.w13_scales.size() : 0) + (x.new_w2_scales ? x.w2_scales.size() : 0);
  }
  return bytes;
}

// A layer case's path from CheckCase to the kernels admits no scale byte twice (counted by
// AdmittedByteCount in AdmitLayer): once on the CPU side, and with a device (skipped without one)
// the capture, every replay's routes and the layer's WriteWeights take the same verdicts.
void ExpectEachScaleByteAdmittedOnce(bool use_device) {
  LayerDifferential differential(use_device);
  if (use_device && !differential.device_available()) {
    GTEST_SKIP() << "no calibrated CUDA device: " << differential.device().status();
  }
  std::vector<LayerCase> cases;
  for (const std::vector<uint8_t>& bytes : CorpusCases()) cases.push_back(*DecodeLayerCase(bytes));
  CaseRng rng(20261205);
  for (int i = 0; i < 20; ++i) cases.push_back(RandomLayerCase(rng, kLayerProfile));
  size_t shared = 0;  // cases where a replay runs on scales an earlier one ran on
  for (const LayerCase& c : cases) {
    shared += c.replays.size() > 1 && !c.replays[1].new_w13_scales ? 1 : 0;
    const uint64_t before = AdmittedByteCount();
    const CheckResult finding = differential.CheckCase(c);
    EXPECT_FALSE(finding.has_value()) << finding->signature << ": " << finding->description;
    EXPECT_EQ(AdmittedByteCount() - before, DistinctScaleBytes(c)) << DescribeLayerCase(c);
  }
  EXPECT_GT(shared, 0u) << "no case replays scales twice: the count could not see a second admission";
}

TEST(LayerTarget, TheCpuPathAdmitsEachScaleByteOnce) { ExpectEachScaleByteAdmittedOnce(/*use_device=*/false); }

TEST(LayerTarget, TheDevicePathAdmitsEachScaleByteOnce) { ExpectEachScaleByteAdmittedOnce(/*use_device=*/true); }

TEST(LayerTarget, MapsUnbuiltTacticsOntoBuiltOnes) {
  const Tactic built{.cta_m = 16, .cta_n = 128, .cta_k = 32, .splits = 5, .swizzle = 2};
  EXPECT_EQ(MapLayerTactic(built), built);
  const Tactic mapped = MapLayerTactic(Tactic{.cta_m = 24, .cta_n = 7, .cta_k = 12, .splits = 9, .swizzle = 6});
  EXPECT_EQ(mapped.splits, 9);
  EXPECT_EQ(mapped.swizzle, 6);
  EXPECT_EQ(mapped.cta_n, 128);
}

}  // namespace
}  // namespace mxdiff::fuzz
