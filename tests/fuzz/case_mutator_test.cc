#include "fuzz/mutators/case_mutator.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "fuzz/checks/gemm_differential.h"
#include "fuzz/mutators/mutation_sequence.h"
#include "fuzz/driver/target_driver.h"
#include "gtest/gtest.h"
#include "reference/split_plan.h"
#include "tests/reference/test_seed.h"

namespace mxdiff::fuzz {
namespace {

bool WithinLimits(const FuzzCase& c, const ShapeLimits& limits) {
  if (c.groups > limits.max_groups || c.n > limits.max_n || c.k > limits.max_k || c.rows() > limits.max_rows) {
    return false;
  }
  for (int g = 0; g < c.groups; ++g) {
    if (c.group_rows(g) > limits.max_rows_per_group) return false;
  }
  return int64_t(c.groups) * c.n * c.k <= limits.max_weight_elements &&
         int64_t(c.rows()) * c.n * c.k <= limits.max_products;
}

size_t ExplicitBytes(const FuzzCase& c, TensorKind kind) {
  if (c.recipe(kind)) return 0;
  return kind == TensorKind::kActivations ? c.activations.size() * 2
                                          : kind == TensorKind::kCodes ? c.packed_codes.size() : c.scale_bytes.size();
}

TEST(CaseMutator, EveryMutationIsAValidCaseWithinTheProfile) {
  const uint64_t seed = mxdiff::testing::TestSeed();
  CaseRng rng(seed);
  const std::pair<const char*, MutationProfile> profiles[] = {{"transform", kTransformProfile},
                                                              {"dispatch", kDispatchProfile},
                                                              {"reference", kReferenceProfile},
                                                              {"gemm", kGemmProfile}};
  for (const auto& [name, profile] : profiles) {
    FuzzCase c = RandomCase(rng, profile);
    for (int i = 0; i < 3000; ++i) {
      MutateCase(c, rng, profile);
      const absl::Status status = ValidateCase(c);
      ASSERT_TRUE(status.ok()) << name << " mutation " << i << " (MXDIFF_SEED=" << seed << "): " << status;
      ASSERT_TRUE(WithinLimits(c, profile.large)) << name << " mutation " << i << " left the profile:\n"
                                                  << DescribeCase(c);
      if (profile.real_shapes_one_in == 0) {
        ASSERT_TRUE(WithinLimits(c, profile.small)) << name << " mutation " << i << ":\n" << DescribeCase(c);
      }
      for (int kind = 0; kind < kTensorKindCount; ++kind) {
        ASSERT_LE(ExplicitBytes(c, TensorKind(kind)), profile.max_explicit_bytes) << name << " mutation " << i;
        // The mutator never materializes a recipe (a real-shape case would cost 0.5 GB).
        if (c.recipes[kind]) {
          ASSERT_TRUE(kind == 0 ? c.activations.empty() : kind == 1 ? c.packed_codes.empty() : c.scale_bytes.empty());
        }
      }
    }
  }
}

TEST(CaseMutator, ReachesEveryScaleClassRequestPolicyAndModel) {
  CaseRng rng(mxdiff::testing::TestSeed());
  FuzzCase c = RandomCase(rng, kDispatchProfile);
  std::set<int> classes, requests, policies, models, splits;
  for (int i = 0; i < 5000; ++i) {
    MutateCase(c, rng, kDispatchProfile);
    MaterializeCase(c);
    for (uint8_t raw : c.scale_bytes) {
      const int a = adjusted_exponent(raw);
      classes.insert(a == 0 ? 0 : a <= 16 ? 1 : a == 17 ? 2 : a < 30 ? 3 : 4);
    }
    requests.insert(int(c.request));
    policies.insert(int(c.policy));
    models.insert(int(c.model));
    splits.insert(c.tactic.splits > 1 ? 1 : 0);
  }
  EXPECT_EQ(classes.size(), 5u);
  EXPECT_EQ(requests.size(), 3u);
  EXPECT_EQ(policies.size(), 2u);
  EXPECT_EQ(models.size(), size_t(kStepModelCount));
  EXPECT_EQ(splits.size(), 2u);
}

TEST(CaseMutator, EncodedMutationRepairsGarbageAndRespectsMaxSize) {
  CaseRng rng(mxdiff::testing::TestSeed());
  for (const MutationProfile& profile : {kReferenceProfile, kGemmProfile}) {
    std::vector<uint8_t> buffer(40960);
    size_t size = 7;
    for (size_t i = 0; i < size; ++i) buffer[i] = uint8_t(rng());
    for (int i = 0; i < 2000; ++i) {
      const size_t max_size = 60 + rng() % 3000;
      size = std::min(size, max_size);
      const size_t mutated = MutateEncodedCase(buffer.data(), size, max_size, unsigned(rng()), profile, {});
      ASSERT_LE(mutated, max_size);
      if (mutated == 0) continue;  // no case that small: libFuzzer keeps the input
      size = mutated;
      FuzzCase decoded;  // the description is enough (a real-shape case would materialize 12.6 MB or more)
      const absl::Status status = DecodeCaseInto(std::span<const uint8_t>(buffer.data(), size), decoded,
                                                 Materialize::kNo);
      ASSERT_TRUE(status.ok()) << "iteration " << i << ": " << status;
    }
  }
}

// What a real decode launch looks like, and how often fuzz_gemm's mutator builds one.
struct RealShapeCounts {
  std::map<std::string, int> shapes;  // decode shape name -> cases
  int top6_over_6 = 0, top6_over_256 = 0, few_rows = 0, shared_expert = 0, rows_512 = 0, one_of_256 = 0;
  int small = 0, decode_class = 0, total = 0;
};

RealShapeCounts CountRealShapes(uint64_t seed, int mutations) {
  CaseRng rng(seed);
  RealShapeCounts counts;
  FuzzCase c = RandomCase(rng, kGemmProfile);
  for (int i = 0; i < mutations; ++i) {
    MutateCase(c, rng, kGemmProfile);
    ++counts.total;
    counts.small += WithinLimits(c, kGemmProfile.small);
    counts.decode_class += ShapeClassOf(c) == ShapeClass::kDecode;
    const std::vector<int> owning = c.GroupsWithRows();
    int max_rows = 0;
    for (int g : owning) max_rows = std::max(max_rows, c.group_rows(g));
    for (const DecodeShape& shape : kDecodeShapes) {
      if (c.n != shape.n || c.k != shape.k) continue;
      ++counts.shapes[std::string(shape.name)];
      counts.top6_over_6 += c.groups == kTopK && owning.size() == size_t(kTopK) && max_rows == 1;
      counts.top6_over_256 += c.groups == kRoutedExperts && owning.size() == size_t(kTopK) && max_rows == 1;
      counts.few_rows += owning.size() == size_t(kTopK) && max_rows > 1;
      counts.shared_expert += c.groups == 1 && c.rows() > 0;
      counts.one_of_256 += c.groups == kRoutedExperts && owning.size() == 1;
    }
    counts.rows_512 += c.rows() == kMaxRows;
  }
  return counts;
}

TEST(CaseMutator, FuzzGemmSpendsAThirdOfItsCasesAtTheRealDecodeShapes) {
  const uint64_t seed = mxdiff::testing::TestSeed();
  constexpr int kMutations = 20000;
  const RealShapeCounts counts = CountRealShapes(seed, kMutations);
  std::printf("of %d mutations (MXDIFF_SEED=%llu): %d small, %d of the campaign's decode class;", counts.total,
              (unsigned long long)seed, counts.small, counts.decode_class);
  for (const auto& [name, count] : counts.shapes) std::printf(" %s %d,", name.c_str(), count);
  std::printf(" top-6 over 6 experts %d, over 256 %d, a few rows %d, shared expert %d, one of 256 %d, 512 rows %d\n",
              counts.top6_over_6, counts.top6_over_256, counts.few_rows, counts.shared_expert, counts.one_of_256,
              counts.rows_512);
  for (const DecodeShape& shape : kDecodeShapes) {
    EXPECT_GE(counts.shapes.count(std::string(shape.name)) ? counts.shapes.at(std::string(shape.name)) : 0, kMutations / 400) << shape.name;
  }
  // One jump in 2, pulled back in one mutation of 2: about half the cases real, each routing about
  // 1 in 6 of those; a third at the decode shapes the campaign counts (issue 19).
  EXPECT_GE(counts.decode_class, kMutations / 3);
  EXPECT_GE(counts.top6_over_6, kMutations / 2000);
  EXPECT_GE(counts.top6_over_256, kMutations / 2000);
  EXPECT_GE(counts.few_rows, kMutations / 2000);
  EXPECT_GE(counts.shared_expert, kMutations / 2000);
  EXPECT_GE(counts.one_of_256, kMutations / 2000);
  EXPECT_GE(counts.rows_512, kMutations / 4000);
  EXPECT_GE(counts.small, kMutations * 30 / 100);
  // The CPU targets never leave their small profiles.
  CaseRng rng(seed);
  FuzzCase c = RandomCase(rng, kReferenceProfile);
  for (int i = 0; i < 5000; ++i) {
    MutateCase(c, rng, kReferenceProfile);
    ASSERT_TRUE(WithinLimits(c, kReferenceProfile.small));
  }
}

// Classifies where an override sits, independently of the mutator's PickSite.
struct SiteCounts {
  int placed = 0, split_tail = 0, last_column = 0, partial_tile_last_column = 0, after_empty = 0,
      block_boundary = 0;
};

void Classify(const FuzzCase& c, TensorKind kind, uint32_t index, SiteCounts& counts) {
  ++counts.placed;
  int row = -1, group = 0, column = 0, kk = 0;
  const int blocks = c.k / kBlockK;
  if (kind == TensorKind::kActivations) {
    row = int(index / uint32_t(c.k));
    kk = int(index % uint32_t(c.k));
    while (c.row_offsets[group + 1] <= row) ++group;
  } else {
    const uint32_t per_row = kind == TensorKind::kCodes ? uint32_t(c.k) : uint32_t(blocks);
    group = int(index / per_row / uint32_t(c.n));
    column = int(index / per_row % uint32_t(c.n));
    kk = int(index % per_row) * (kind == TensorKind::kCodes ? 1 : kBlockK);
  }
  const int splits = effective_splits(c.k, c.tactic.cta_k, c.tactic.splits);
  for (int s = 0; s < splits; ++s) {
    const KRange range = split_k_range(c.k, c.tactic.cta_k, c.tactic.splits, s);
    const int last_block = (range.end - 1) / kBlockK;
    if (kind == TensorKind::kScales ? kk / kBlockK == last_block
                                    : kk >= std::max(range.begin, last_block * kBlockK) && kk < range.end) {
      ++counts.split_tail;
      break;
    }
  }
  if (kind != TensorKind::kActivations && column == c.n - 1) {
    ++counts.last_column;
    counts.partial_tile_last_column += c.n % c.tactic.cta_n != 0;
  }
  const bool after_empty_group = group > 0 && c.group_rows(group - 1) == 0 && c.group_rows(group) > 0;
  if (after_empty_group && (kind != TensorKind::kActivations || row == c.row_offsets[group])) ++counts.after_empty;
  if (kind != TensorKind::kScales && (kk % kBlockK == 0 || kk % kBlockK == kBlockK - 1)) ++counts.block_boundary;
}

TEST(CaseMutator, PlacesOverridesWhereDefectsLive) {
  const uint64_t seed = mxdiff::testing::TestSeed();
  CaseRng rng(seed);
  SiteCounts counts;
  // Shapes where the places exist: empty groups, several splits, N past a tile.
  FuzzCase c = RandomCase(rng, kGemmProfile);
  for (int i = 0; i < 40000; ++i) {
    const auto before = c.recipes;
    MutateCase(c, rng, kGemmProfile);
    for (int kind = 0; kind < kTensorKindCount; ++kind) {
      if (!c.recipes[kind]) continue;
      std::set<std::pair<uint32_t, uint16_t>> old;
      if (before[kind]) {
        for (const TensorOverride& o : before[kind]->overrides) old.insert({o.index, o.value});
      }
      for (const TensorOverride& o : c.recipes[kind]->overrides) {
        if (!old.count({o.index, o.value})) Classify(c, TensorKind(kind), o.index, counts);
      }
    }
  }
  std::printf("%d overrides placed or moved (MXDIFF_SEED=%llu): last k block of a split %d, last column %d (of a "
              "partial tile %d), first row/group after an empty expert %d, at a block boundary %d\n",
              counts.placed, (unsigned long long)seed, counts.split_tail, counts.last_column,
              counts.partial_tile_last_column, counts.after_empty, counts.block_boundary);
  ASSERT_GT(counts.placed, 5000);
  // A uniform placement would hit each place rarely (the last column 1 in N, a split's last
  // block 1 in K/32 per split...); the mutator aims at them.
  EXPECT_GT(counts.split_tail, counts.placed / 5);
  EXPECT_GT(counts.last_column, counts.placed / 10);
  EXPECT_GT(counts.partial_tile_last_column, counts.placed / 20);
  EXPECT_GT(counts.after_empty, counts.placed / 20);
  EXPECT_GT(counts.block_boundary, counts.placed / 5);
}

TEST(CaseMutator, PickSiteFindsTheFirstRowAfterAnEmptyExpert) {
  FuzzCase c;
  const int rows[] = {2, 0, 0, 3, 0, 1};
  ResizeCase(c, 6, 200, 256, rows);
  c.tactic = Tactic{16, 128, 64, 3, 0};
  CaseRng rng(mxdiff::testing::TestSeed());
  std::map<int, int> first_rows;
  int last_column = 0, split_tails = 0;
  for (int i = 0; i < 3000; ++i) {
    const ElementSite site = PickSite(c, rng);
    ASSERT_GE(site.row, 0);
    ASSERT_EQ(c.row_offsets[site.group] <= site.row && site.row < c.row_offsets[site.group + 1], true);
    if (site.row == c.row_offsets[3] || site.row == c.row_offsets[5]) ++first_rows[site.row];
    last_column += site.column == 199;  // 200 = 128 + a partial tile of 72
    for (int s = 0; s < 3; ++s) split_tails += site.k == split_k_range(256, 64, 3, s).end - 1;
    ASSERT_GE(SiteIndex(c, TensorKind::kCodes, site), 0);
    ASSERT_LT(SiteIndex(c, TensorKind::kCodes, site), int64_t(c.element_count(TensorKind::kCodes)));
    ASSERT_LT(SiteIndex(c, TensorKind::kScales, site), int64_t(c.element_count(TensorKind::kScales)));
    ASSERT_LT(SiteIndex(c, TensorKind::kActivations, site), int64_t(c.element_count(TensorKind::kActivations)));
  }
  // Rows 2 and 5 are the first after an empty expert: about 1/3 of all picks go to one of them.
  EXPECT_GT(first_rows[c.row_offsets[3]] + first_rows[c.row_offsets[5]], 3000 / 4);
  EXPECT_GT(last_column, 3000 / 8);
  EXPECT_GT(split_tails, 3000 / 8);
}

// Every encoded mutation records the names of the mutations that produced it (libFuzzer's
// mutation sequence), for that output only; over many mutations every name of the table shows.
TEST(CaseMutator, RecordsTheNamedMutationsThatProducedEachInput) {
  CaseRng rng(mxdiff::testing::TestSeed());
  const std::vector<std::string_view> table = CaseMutationNames();
  std::set<std::string_view> known(table.begin(), table.end());
  for (std::string_view extra : {"random-case", "real-shape", "activation-bytes", "fit-max-len"}) known.insert(extra);
  std::set<std::string> seen;
  std::vector<uint8_t> buffer(40960);
  size_t size = 0;
  for (int i = 0; i < 600; ++i) {
    const size_t mutated = MutateEncodedCase(buffer.data(), size, buffer.size(), unsigned(rng()), kGemmProfile,
                                             [](uint8_t*, size_t n, size_t) { return n; });
    if (mutated == 0) continue;
    size = mutated;
    const std::string sequence = MutationSequenceOf(std::span<const uint8_t>(buffer.data(), size));
    ASSERT_FALSE(sequence.empty()) << "mutation " << i;
    std::vector<uint8_t> other(buffer.begin(), buffer.begin() + long(size));
    other.back() ^= 1;
    EXPECT_EQ(MutationSequenceOf(other), "") << "another input has no sequence";
    // Names may hold '-' themselves: split on the known names.
    for (size_t at = 0; at < sequence.size();) {
      std::string_view name;
      for (std::string_view candidate : known) {
        if (sequence.compare(at, candidate.size(), candidate) == 0 && candidate.size() > name.size() &&
            (at + candidate.size() == sequence.size() || sequence[at + candidate.size()] == '-')) {
          name = candidate;
        }
      }
      ASSERT_FALSE(name.empty()) << "unknown mutation at " << at << " of " << sequence;
      seen.insert(std::string(name));
      at += name.size() + 1;
    }
  }
  for (std::string_view name : table) EXPECT_TRUE(seen.contains(std::string(name))) << name << " never drawn";
}

// Pick draws from the table's own size (libFuzzer's model), so a slot added to a table of mutations
// or of interesting values is drawn without touching its picks: every slot of tables of several
// sizes shows, in about equal shares, and nothing else does.
TEST(CaseMutator, PickDrawsEverySlotOfItsTable) {
  CaseRng rng(mxdiff::testing::TestSeed());
  constexpr int kSeven[] = {0, 1, 2, 3, 4, 5, 6};
  constexpr int kSeventeen[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  std::map<int, int> seven, seventeen;
  for (int draw = 0; draw < 17000; ++draw) {
    ++seven[Pick(rng, kSeven)];
    ++seventeen[Pick(rng, kSeventeen)];
  }
  EXPECT_EQ(seven.size(), std::size(kSeven));
  EXPECT_EQ(seventeen.size(), std::size(kSeventeen));
  for (const auto& [value, count] : seventeen) EXPECT_GT(count, 700) << value;  // 1000 expected
}

}  // namespace
}  // namespace mxdiff::fuzz
