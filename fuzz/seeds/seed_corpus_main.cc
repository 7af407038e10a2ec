// Writes the structured seed corpus of every fuzz target into OUT/<target>/ through the case
// encoder: each route (the four reasons and both fail-closed errors), each scale-byte class
// (a = 0, 1..16, 17, 18..29, 30 and the NaN byte), the plan shapes (one split, several,
// clamped, partial last chunk), every step model, fp16 specials, and the decode shapes of the
// builtin kernels; then the version 2 seeds (named v2-*): every value class of the tensor
// recipes, and for fuzz_gemm the real decode shapes (W13 and W2 at TP4 and TP8, top-6 routing
// over 6 and over 256 experts, almost-all-empty routings, a 64-row expert, 512 rows) with
// overrides where defects live. The seeds are then merged into corpus/ with libFuzzer's
// -merge=1 (corpus/README.md). Deterministic: the same binary writes the same files.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "reference/scale_class.h"
#include "fmt/core.h"
#include "fuzz/formats/case_format.h"
#include "fuzz/mutators/case_mutator.h"
#include "fuzz/driver/target_driver.h"
#include "kernels/builtin_kernels.h"
#include "kernels/dispatch_table.h"
#include "reference/exit_status.h"
#include "reference/split_plan.h"

namespace {

using mxdiff::Tactic;
using mxdiff::Transform;
using mxdiff::TransformRequest;
using mxdiff::FallbackPolicy;
using mxdiff::StepModel;
using mxdiff::fuzz::FuzzCase;
using mxdiff::fuzz::TensorKind;
using mxdiff::fuzz::TensorRecipe;
using mxdiff::fuzz::ValueClass;

constexpr uint8_t kClassBytes[] = {0, 112, 113, 120, 127, 128, 129, 135, 142, 200, 254, 255};

class SeedWriter {
 public:
  explicit SeedWriter(std::filesystem::path root) : root_(std::move(root)) {}

  bool Write(const std::string& target, const std::string& label, const FuzzCase& c) {
    absl::StatusOr<std::vector<uint8_t>> bytes = mxdiff::fuzz::EncodeCase(c);
    if (!bytes.ok()) {
      fmt::print(stderr, "seed {}/{} is invalid: {}\n", target, label, bytes.status().ToString());
      return ok_ = false;
    }
    std::filesystem::create_directories(root_ / target);
    std::ofstream out(root_ / target / (label + ".case"), std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes->data()), std::streamsize(bytes->size()));
    ++written_;
    return ok_ = ok_ && bool(out);
  }
  bool ok() const { return ok_; }
  int written() const { return written_; }

 private:
  std::filesystem::path root_;
  bool ok_ = true;
  int written_ = 0;
};

FuzzCase Shaped(mxdiff::fuzz::CaseRng& rng, int groups, std::vector<int> rows, int n, int k, uint8_t scale_fill) {
  FuzzCase c;
  mxdiff::fuzz::ResizeCase(c, groups, n, k, rows);
  for (uint16_t& a : c.activations) a = uint16_t((rng() & 0x8000) | ((10 + rng() % 10) << 10) | (rng() & 0x3FF));
  for (uint8_t& byte : c.packed_codes) byte = uint8_t(rng());
  const mxdiff::RawRange admitted = mxdiff::ScaleClassRange(mxdiff::ScaleClass::kAdmitted);
  for (uint8_t& raw : c.scale_bytes) {
    raw = scale_fill != 0xFE ? scale_fill : uint8_t(admitted.first + rng() % (admitted.last - admitted.first + 1));
  }
  c.registry = {{c.tactic, Transform::kOrdinary}, {c.tactic, Transform::kFolded}};
  return c;
}

void TransformSeeds(SeedWriter& out, mxdiff::fuzz::CaseRng& rng) {
  for (uint8_t raw : kClassBytes) {
    FuzzCase c = Shaped(rng, 1, {1}, 4, 32, raw);
    c.request = TransformRequest::kAuto;
    out.Write("fuzz_transform", fmt::format("class-raw{}", raw), c);
  }
  for (int part = 0; part < 8; ++part) {  // all 256 scale bytes, 32 per case
    FuzzCase c = Shaped(rng, 2, {1, 0}, 8, 64, 0);
    for (size_t i = 0; i < c.scale_bytes.size(); ++i) c.scale_bytes[i] = uint8_t(part * 32 + int(i));
    c.request = TransformRequest(part % 3);
    out.Write("fuzz_transform", fmt::format("all-bytes-{}", part), c);
  }
  FuzzCase admitted = Shaped(rng, 1, {1}, 8, 64, 0xFE);
  admitted.request = TransformRequest::kFolded;
  out.Write("fuzz_transform", "admitted-folded", admitted);
}

void DispatchSeeds(SeedWriter& out, mxdiff::fuzz::CaseRng& rng) {
  const uint8_t layers[] = {120, 112, 129, 255};  // admitted, then refused classes
  for (uint8_t raw : layers) {
    for (int request = 0; request < 3; ++request) {
      for (int policy = 0; policy < 2; ++policy) {
        for (int registry = 0; registry < 4; ++registry) {
          FuzzCase c = Shaped(rng, 1, {1}, 2, 32, raw);
          c.tactic = Tactic{16, 128, 32, 1 + registry, 0};
          c.request = TransformRequest(request);
          c.policy = FallbackPolicy(policy);
          c.registry.clear();
          if (registry != 3) c.registry.push_back({c.tactic, Transform::kOrdinary});  // 3: nothing launches
          if (registry == 0) c.registry.push_back({c.tactic, Transform::kFolded});
          if (registry == 2) c.registry.push_back({Tactic{32, 128, 32, 1, 0}, Transform::kFolded});  // near miss
          out.Write("fuzz_dispatch", fmt::format("raw{}-{}-{}-registry{}", raw,
                                                 mxdiff::TransformRequestName(c.request),
                                                 mxdiff::FallbackPolicyName(c.policy), registry),
                    c);
        }
      }
    }
  }
}

void ReferenceSeeds(SeedWriter& out, mxdiff::fuzz::CaseRng& rng) {
  const int cta_ks[] = {4, 12, 32, 64, 256};
  const int splits[] = {1, 2, 3, 256};
  for (int model = 0; model < mxdiff::kStepModelCount; ++model) {
    for (int cta_k : cta_ks) {
      for (int s : splits) {
        FuzzCase c = Shaped(rng, 2, {1, 2}, 4, 128, 0xFE);
        c.model = StepModel(model);
        c.tactic = Tactic{16, 128, cta_k, s, 0};
        c.request = s == 2 ? TransformRequest::kFolded : TransformRequest::kOrdinary;
        out.Write("fuzz_reference", fmt::format("{}-k{}-s{}", mxdiff::StepModelName(c.model), cta_k, s), c);
      }
    }
    FuzzCase specials = Shaped(rng, 1, {2}, 8, 64, 0xFE);
    specials.model = StepModel(model);
    for (size_t i = 0; i < specials.activations.size(); ++i) {
      specials.activations[i] = mxdiff::fuzz::kInterestingF16[i % std::size(mxdiff::fuzz::kInterestingF16)];
    }
    out.Write("fuzz_reference", fmt::format("{}-specials", mxdiff::StepModelName(specials.model)), specials);
    FuzzCase refused = Shaped(rng, 1, {1}, 4, 96, 0);
    for (size_t i = 0; i < refused.scale_bytes.size(); ++i) refused.scale_bytes[i] = kClassBytes[i % std::size(kClassBytes)];
    refused.model = StepModel(model);
    refused.request = TransformRequest::kFolded;
    refused.tactic.cta_k = 64;  // K = 96: a partial last chunk
    refused.tactic.splits = 2;
    out.Write("fuzz_reference", fmt::format("{}-refused-folded-partial", mxdiff::StepModelName(refused.model)),
              refused);
  }
}

void GemmSeeds(SeedWriter& out, mxdiff::fuzz::CaseRng& rng) {
  int index = 0;
  for (const mxdiff::CtaShape& shape : mxdiff::kCtaShapes) {  // every CTA shape the builtin kernels instantiate
    Tactic tactic{.cta_m = shape.m, .cta_n = shape.n, .cta_k = shape.k, .splits = 1, .swizzle = 0};
    for (int s : {1, 3}) {
      for (uint8_t raw : {uint8_t(0xFE), uint8_t(112), uint8_t(129)}) {
        FuzzCase c = Shaped(rng, 3, {1, 2, 0}, 64, 128, raw);  // decode: a row or two per expert
        tactic.splits = s;
        c.tactic = tactic;
        c.request = TransformRequest(index % 3);
        c.policy = FallbackPolicy(index / 3 % 2);
        out.Write("fuzz_gemm", fmt::format("{}x{}x{}-s{}-raw{}", tactic.cta_m, tactic.cta_n, tactic.cta_k, s,
                                           raw == 0xFE ? std::string("admitted") : std::to_string(raw)),
                  c);
        ++index;
      }
    }
  }
  FuzzCase specials = Shaped(rng, 2, {2, 2}, 16, 64, 0xFE);
  for (size_t i = 0; i < specials.activations.size(); ++i) {
    specials.activations[i] = mxdiff::fuzz::kInterestingF16[i % std::size(mxdiff::fuzz::kInterestingF16)];
  }
  out.Write("fuzz_gemm", "specials", specials);
}

// ---- version 2: recipes

// A case of the given routing with every tensor a recipe (nothing materialized: the encoder
// writes the description).
FuzzCase RecipeCase(mxdiff::fuzz::CaseRng& rng, int n, int k, std::vector<int> rows, ValueClass activations,
                    ValueClass codes, ValueClass scales, int scale_rare = 0) {
  FuzzCase c;
  c.groups = int(rows.size());
  c.n = n;
  c.k = k;
  c.row_offsets.assign(rows.size() + 1, 0);
  for (size_t g = 0; g < rows.size(); ++g) c.row_offsets[g + 1] = c.row_offsets[g] + rows[g];
  c.recipe(TensorKind::kActivations) = TensorRecipe{activations, 0, rng(), {}};
  c.recipe(TensorKind::kCodes) = TensorRecipe{codes, 0, rng(), {}};
  c.recipe(TensorKind::kScales) = TensorRecipe{scales, scale_rare, rng(), {}};
  c.registry = {{c.tactic, Transform::kOrdinary}, {c.tactic, Transform::kFolded}};
  return c;
}

void SetTactic(FuzzCase& c, const Tactic& tactic) {
  c.tactic = tactic;
  c.registry = {{tactic, Transform::kOrdinary}, {tactic, Transform::kFolded}};
}

// Top-6 over `experts` (256: the real router's choice leaves 250 empty): chosen experts spread
// out, two of them adjacent, the last one last.
std::vector<int> TopK(int experts, int rows_each) {
  std::vector<int> rows(size_t(experts), 0);
  if (experts <= mxdiff::fuzz::kTopK) {
    rows.assign(size_t(experts), rows_each);
    return rows;
  }
  const int chosen[] = {0, 3, 4, experts * 3 / 8, experts * 7 / 10, experts - 1};
  for (int g : chosen) rows[size_t(g)] = rows_each;
  return rows;
}

// Overrides at the places defects live, for the first group with rows after an empty one (or
// the first with rows): the last k of each split, the last column, a block boundary.
void PlaceDefectOverrides(FuzzCase& c, uint8_t scale, uint16_t activation) {
  const std::vector<int> owning = c.GroupsWithRows();
  int group = owning.front();
  for (int g : owning) {
    if (g > 0 && c.group_rows(g - 1) == 0) {
      group = g;
      break;
    }
  }
  const int splits = mxdiff::effective_splits(c.k, c.tactic.cta_k, c.tactic.splits);
  const int64_t column = c.n - 1;
  for (int s = 0; s < splits && s < 4; ++s) {
    const mxdiff::KRange range = mxdiff::split_k_range(c.k, c.tactic.cta_k, c.tactic.splits, s);
    const int kk = range.end - 1;
    c.recipe(TensorKind::kCodes)->overrides.push_back({uint32_t((group * c.n + column) * c.k + kk), 0x7});
    c.recipe(TensorKind::kScales)->overrides.push_back(
        {uint32_t((group * c.n + column) * (c.k / mxdiff::kBlockK) + kk / mxdiff::kBlockK), scale});
    c.recipe(TensorKind::kActivations)->overrides.push_back(
        {uint32_t(int64_t(c.row_offsets[size_t(group)]) * c.k + kk), activation});
  }
  c.recipe(TensorKind::kActivations)->overrides.push_back(
      {uint32_t(int64_t(c.row_offsets[size_t(group)]) * c.k + mxdiff::kBlockK), 0x8000});  // -0 at a block start
}

void RecipeSeedsForCpuTargets(SeedWriter& out, mxdiff::fuzz::CaseRng& rng) {
  constexpr ValueClass kScaleClasses[] = {ValueClass::kUniform,  ValueClass::kNormal, ValueClass::kSubnormal,
                                          ValueClass::kSpecials, ValueClass::kNarrow, ValueClass::kCheckpoint};
  for (ValueClass scales : kScaleClasses) {
    FuzzCase c = RecipeCase(rng, 8, 64, {1, 1}, ValueClass::kNormal, ValueClass::kUniform, scales);
    out.Write("fuzz_transform", fmt::format("v2-scales-{}", mxdiff::fuzz::ValueClassName(scales)), c);
    c.request = TransformRequest::kAuto;
    out.Write("fuzz_dispatch", fmt::format("v2-scales-{}", mxdiff::fuzz::ValueClassName(scales)), c);
  }
  FuzzCase rare = RecipeCase(rng, 8, 64, {1, 0}, ValueClass::kNormal, ValueClass::kUniform, ValueClass::kCheckpoint, 4);
  out.Write("fuzz_transform", "v2-scales-checkpoint-rare", rare);
  out.Write("fuzz_dispatch", "v2-scales-checkpoint-rare", rare);

  constexpr ValueClass kClasses[] = {ValueClass::kUniform, ValueClass::kNormal, ValueClass::kSubnormal,
                                     ValueClass::kSpecials, ValueClass::kNarrow};
  for (ValueClass activations : kClasses) {
    for (ValueClass codes : {activations, ValueClass::kUniform}) {
      for (int model = 0; model < mxdiff::kStepModelCount; ++model) {
        FuzzCase c = RecipeCase(rng, 8, 128, {1, 2}, activations, codes, ValueClass::kCheckpoint);
        c.model = StepModel(model);
        SetTactic(c, Tactic{16, 128, 32, 3, 0});
        c.request = model % 2 == 0 ? TransformRequest::kOrdinary : TransformRequest::kFolded;
        out.Write("fuzz_reference", fmt::format("v2-{}-{}-{}", mxdiff::fuzz::ValueClassName(activations),
                                                mxdiff::fuzz::ValueClassName(codes), mxdiff::StepModelName(c.model)),
                  c);
      }
    }
  }
  // Many experts, nearly all empty, with overrides at the split tails and the first row after an
  // empty expert.
  FuzzCase sparse = RecipeCase(rng, 8, 128, TopK(16, 1), ValueClass::kNarrow, ValueClass::kNarrow,
                               ValueClass::kCheckpoint);
  SetTactic(sparse, Tactic{16, 128, 32, 3, 0});
  PlaceDefectOverrides(sparse, 113, 0x0001);
  out.Write("fuzz_reference", "v2-16-experts-sparse-overrides", sparse);
}

void RecipeSeedsForGemm(SeedWriter& out, mxdiff::fuzz::CaseRng& rng) {
  using mxdiff::fuzz::kDecodeShapes;
  using mxdiff::fuzz::kRoutedExperts;
  using mxdiff::fuzz::kTopK;
  auto table_tactic = [](const FuzzCase& c) { return mxdiff::TableTactic(mxdiff::ShapeOf(c.n, c.k, c.row_offsets), 132); };
  auto name_of = [](const mxdiff::fuzz::DecodeShape& shape) {
    std::string name(shape.name);
    std::replace(name.begin(), name.end(), ' ', '-');
    return name;
  };
  for (const mxdiff::fuzz::DecodeShape& shape : kDecodeShapes) {
    // One token, top-6 over the 6 chosen experts: the launch the decode route makes.
    FuzzCase c = RecipeCase(rng, shape.n, shape.k, TopK(kTopK, 1), ValueClass::kNormal, ValueClass::kUniform,
                            ValueClass::kCheckpoint);
    SetTactic(c, table_tactic(c));
    out.Write("fuzz_gemm", fmt::format("v2-{}-top6-of-6", name_of(shape)), c);
    // The same with refused bytes and specials where defects live.
    PlaceDefectOverrides(c, 129, 0x7C00);
    c.request = TransformRequest::kFolded;
    out.Write("fuzz_gemm", fmt::format("v2-{}-top6-of-6-refused-at-split-tails", name_of(shape)), c);
  }
  // Over all 256 routed experts (W13 at TP4: the 570 MB layer; W2 at TP8: 134 MB).
  for (const mxdiff::fuzz::DecodeShape& shape : {kDecodeShapes[0], kDecodeShapes[3]}) {
    FuzzCase c = RecipeCase(rng, shape.n, shape.k, TopK(kRoutedExperts, 1), ValueClass::kNormal, ValueClass::kUniform,
                            ValueClass::kCheckpoint);
    SetTactic(c, table_tactic(c));
    PlaceDefectOverrides(c, 120, 0x3C00);
    out.Write("fuzz_gemm", fmt::format("v2-{}-top6-of-256", name_of(shape)), c);
  }
  // The checkpoint's scales with rare out-of-range bytes (about 12 refused in 786,432).
  FuzzCase rare = RecipeCase(rng, 1024, 4096, TopK(kTopK, 1), ValueClass::kNormal, ValueClass::kUniform,
                             ValueClass::kCheckpoint, 16);
  SetTactic(rare, table_tactic(rare));
  out.Write("fuzz_gemm", "v2-W13-PP2xTP4-top6-of-6-checkpoint-rare", rare);
  // A partial last N tile near the real shape.
  FuzzCase partial = RecipeCase(rng, 1000, 4096, TopK(kTopK, 1), ValueClass::kNarrow, ValueClass::kNarrow,
                                ValueClass::kCheckpoint);
  SetTactic(partial, Tactic{8, 128, 64, 16, 0});
  PlaceDefectOverrides(partial, 126, 0x3C00);
  out.Write("fuzz_gemm", "v2-n1000-partial-tile-top6-of-6", partial);
  // A few tokens over 256 experts (small N x K), one expert of 256, a 64-row shared expert, 512 rows.
  FuzzCase few = RecipeCase(rng, 128, 256, TopK(kRoutedExperts, 3), ValueClass::kNormal, ValueClass::kUniform,
                            ValueClass::kCheckpoint);
  SetTactic(few, Tactic{16, 128, 32, 3, 0});
  PlaceDefectOverrides(few, 112, 0x0001);
  out.Write("fuzz_gemm", "v2-256-experts-3-rows-each", few);
  std::vector<int> one(kRoutedExperts, 0);
  one.back() = 1;
  FuzzCase last = RecipeCase(rng, 256, 512, one, ValueClass::kNormal, ValueClass::kUniform, ValueClass::kCheckpoint);
  SetTactic(last, Tactic{8, 128, 64, 2, 0});
  out.Write("fuzz_gemm", "v2-one-of-256-experts-last", last);
  FuzzCase shared = RecipeCase(rng, 128, 512, {mxdiff::fuzz::kMaxRowsPerGroup}, ValueClass::kSpecials,
                               ValueClass::kUniform, ValueClass::kCheckpoint);
  SetTactic(shared, Tactic{64, 128, 32, 2, 0});
  out.Write("fuzz_gemm", "v2-shared-expert-64-rows", shared);
  FuzzCase full = RecipeCase(rng, 64, 128, std::vector<int>(8, mxdiff::fuzz::kMaxRowsPerGroup), ValueClass::kNormal,
                             ValueClass::kUniform, ValueClass::kCheckpoint);
  SetTactic(full, Tactic{64, 128, 32, 1, 0});
  out.Write("fuzz_gemm", "v2-512-rows", full);
  // Cancellation and subnormals at a decode shape.
  for (ValueClass activations : {ValueClass::kNarrow, ValueClass::kSubnormal}) {
    FuzzCase c = RecipeCase(rng, 4096, 512, TopK(kTopK, 1), activations,
                            activations == ValueClass::kNarrow ? ValueClass::kNarrow : ValueClass::kSubnormal,
                            ValueClass::kCheckpoint);
    SetTactic(c, table_tactic(c));
    out.Write("fuzz_gemm", fmt::format("v2-W2-PP2xTP4-top6-of-6-{}", mxdiff::fuzz::ValueClassName(activations)), c);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fmt::print(stderr, "usage: {} OUT_DIR\n  writes OUT_DIR/<target>/*.case seeds for every fuzz target\n", argv[0]);
    return mxdiff::kExitBadInput;
  }
  SeedWriter out(argv[1]);
  mxdiff::fuzz::CaseRng rng(4);
  TransformSeeds(out, rng);
  DispatchSeeds(out, rng);
  ReferenceSeeds(out, rng);
  GemmSeeds(out, rng);
  RecipeSeedsForCpuTargets(out, rng);
  RecipeSeedsForGemm(out, rng);
  fmt::print("wrote {} seeds under {}\n", out.written(), argv[1]);
  return out.ok() ? mxdiff::kExitOk : mxdiff::kExitCheckFailed;  // 1: a seed failed to encode or write
}
