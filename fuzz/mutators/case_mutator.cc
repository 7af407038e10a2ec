#include "fuzz/mutators/case_mutator.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "fuzz/mutators/fuzz_rules.h"
#include "fuzz/mutators/mutation_sequence.h"
#include "kernels/dispatch_table.h"
#include "reference/admission.h"
#include "reference/split_plan.h"

namespace mxdiff::fuzz {
namespace {

int Uniform(CaseRng& rng, int low, int high) {  // inclusive; low when the range is empty
  return high <= low ? low : low + int(rng() % uint64_t(high - low + 1));
}
bool OneIn(CaseRng& rng, int n) { return n <= 1 || rng() % uint64_t(n) == 0; }

// A finite fp16 of moderate magnitude (2^-6 .. 2^5): sums stay well inside fp32 so the
// interesting differences are rounding, not overflow.
uint16_t OrdinaryF16(CaseRng& rng) {
  const uint16_t sign = OneIn(rng, 2) ? 0x8000 : 0;
  const uint16_t exponent = uint16_t(Uniform(rng, 9, 20));
  return uint16_t(sign | (exponent << 10) | uint16_t(rng() & 0x3FF));
}

uint16_t AnyF16(CaseRng& rng) {
  switch (rng() % 8) {
    case 0:
      return Pick(rng, kInterestingF16);
    case 1:
      return uint16_t(rng());
    default:
      return OrdinaryF16(rng);
  }
}

// The bytes FoldAdmitted admits (derived from the transforms, never typed in).
const std::vector<uint8_t>& AdmittedBytes() {
  static const std::vector<uint8_t> bytes = [] {
    std::vector<uint8_t> result;
    for (int raw = 0; raw < 256; ++raw) {
      if (FoldAdmitted(uint8_t(raw))) result.push_back(uint8_t(raw));
    }
    return result;
  }();
  return bytes;
}

uint8_t AdmittedScale(CaseRng& rng) {
  const std::vector<uint8_t>& admitted = AdmittedBytes();
  return admitted.empty() ? uint8_t(rng()) : admitted[rng() % admitted.size()];
}

uint8_t AnyScale(CaseRng& rng) {
  switch (rng() % 6) {
    case 0:
      return Pick(rng, kInterestingScaleBytes);
    case 1:
      return uint8_t(rng());
    default:
      return AdmittedScale(rng);
  }
}

constexpr uint8_t kEdgeCodes[] = {0x0, 0x8, 0x7, 0xF};  // +-0, +-6

uint16_t ElementValue(CaseRng& rng, TensorKind kind) {
  switch (kind) {
    case TensorKind::kActivations:
      return OneIn(rng, 2) ? Pick(rng, kInterestingF16) : AnyF16(rng);
    case TensorKind::kCodes:
      return OneIn(rng, 2) ? Pick(rng, kEdgeCodes) : uint16_t(rng() & 0xF);
    case TensorKind::kScales:
      return AnyScale(rng);
  }
  return 0;
}

int EdgeInt(CaseRng& rng, int low, int high) {
  switch (rng() % 4) {
    case 0:
      return low;
    case 1:
      return high;
    default:
      return Uniform(rng, low, high);
  }
}

}  // namespace

Tactic RandomTactic(CaseRng& rng) {
  Tactic tactic;
  tactic.cta_m = Pick(rng, kInterestingTiles);
  tactic.cta_n = Pick(rng, kInterestingTiles);
  tactic.cta_k = OneIn(rng, 4) ? 4 * Uniform(rng, 1, kMaxCtaK / 4) : Pick(rng, kInterestingCtaK);
  tactic.splits = OneIn(rng, 3) ? 1 : (OneIn(rng, 8) ? Uniform(rng, 1, kMaxSplits) : Uniform(rng, 1, 8));
  tactic.swizzle = Uniform(rng, 0, kMaxSwizzle);
  return tactic;
}

namespace {

ValueClass RandomClass(CaseRng& rng, TensorKind kind) {
  if (kind == TensorKind::kScales) {
    // Mostly admitted layers, so folded routes run; the rest every class.
    static constexpr ValueClass kScaleClasses[] = {ValueClass::kCheckpoint, ValueClass::kCheckpoint,
                                                   ValueClass::kCheckpoint, ValueClass::kNormal,
                                                   ValueClass::kNormal,     ValueClass::kUniform,
                                                   ValueClass::kSpecials,   ValueClass::kSubnormal,
                                                   ValueClass::kNarrow};
    return Pick(rng, kScaleClasses);
  }
  if (OneIn(rng, 2)) return kind == TensorKind::kActivations ? ValueClass::kNormal : ValueClass::kUniform;
  return ValueClass(Uniform(rng, 0, int(ValueClass::kNarrow)));
}

int RandomRare(CaseRng& rng) { return OneIn(rng, 2) ? 0 : Uniform(rng, 1, 24); }

TensorRecipe RandomRecipe(CaseRng& rng, TensorKind kind) {
  TensorRecipe recipe;
  recipe.value_class = RandomClass(rng, kind);
  recipe.rare_log2 = RandomRare(rng);
  recipe.seed = rng();
  return recipe;
}

size_t ExplicitBytes(const FuzzCase& c, TensorKind kind) {
  const size_t elements = c.element_count(kind);
  return kind == TensorKind::kActivations ? elements * 2 : kind == TensorKind::kCodes ? elements / 2 : elements;
}

void RandomPayload(FuzzCase& c, CaseRng& rng, TensorKind kind) {
  switch (kind) {
    case TensorKind::kActivations:
      for (uint16_t& a : c.activations) a = OneIn(rng, 16) ? AnyF16(rng) : OrdinaryF16(rng);
      break;
    case TensorKind::kCodes:
      for (uint8_t& byte : c.packed_codes) byte = uint8_t(rng());
      break;
    case TensorKind::kScales: {
      const bool admitted_layer = !OneIn(rng, 3);
      for (uint8_t& raw : c.scale_bytes) raw = admitted_layer ? AdmittedScale(rng) : AnyScale(rng);
      break;
    }
  }
}

// Drops a tensor's vector for a fresh recipe (nothing is materialized here).
void ToRecipe(FuzzCase& c, CaseRng& rng, TensorKind kind) {
  c.recipe(kind) = RandomRecipe(rng, kind);
}

void ClearRecipeVectors(FuzzCase& c) {
  if (c.recipe(TensorKind::kActivations)) c.activations.clear();
  if (c.recipe(TensorKind::kCodes)) c.packed_codes.clear();
  if (c.recipe(TensorKind::kScales)) c.scale_bytes.clear();
}

// ---- shapes

struct Shape {
  int groups;
  int n;
  int k;
  std::vector<int> rows;

  int total_rows() const { return std::accumulate(rows.begin(), rows.end(), 0); }
};

Shape ShapeOfCase(const FuzzCase& c) {
  Shape shape{c.groups, c.n, c.k, std::vector<int>(size_t(c.groups))};
  for (int g = 0; g < c.groups; ++g) shape.rows[g] = c.group_rows(g);
  return shape;
}

bool Fits(const Shape& s, const ShapeLimits& limits) {
  if (s.groups < 1 || s.groups > limits.max_groups || s.n < 1 || s.n > limits.max_n || s.k < kBlockK ||
      s.k > limits.max_k || s.k % kBlockK != 0) {
    return false;
  }
  for (int r : s.rows) {
    if (r < 0 || r > limits.max_rows_per_group) return false;
  }
  const int64_t weights = int64_t(s.groups) * s.n * s.k;
  return s.total_rows() <= limits.max_rows && weights <= limits.max_weight_elements &&
         int64_t(s.total_rows()) * s.n * s.k <= limits.max_products;
}

// Pulls a shape inside the limits, keeping as much of it as fits.
void FitShape(Shape& s, const ShapeLimits& limits) {
  s.groups = std::clamp(s.groups, 1, limits.max_groups);
  s.rows.resize(size_t(s.groups), 0);
  for (int& r : s.rows) r = std::clamp(r, 0, limits.max_rows_per_group);
  for (int g = s.groups - 1, excess = s.total_rows() - limits.max_rows; g >= 0 && excess > 0; --g) {
    const int cut = std::min(s.rows[g], excess);
    s.rows[g] -= cut;
    excess -= cut;
  }
  s.n = std::clamp(s.n, 1, limits.max_n);
  s.k = std::clamp(s.k / kBlockK * kBlockK, kBlockK, limits.max_k / kBlockK * kBlockK);
  while (int64_t(s.groups) * s.n * s.k > limits.max_weight_elements) {
    if (s.n > 1 && (s.n >= s.k || s.k == kBlockK)) {
      s.n = std::max(1, s.n / 2);
    } else if (s.k > kBlockK) {
      s.k = std::max(kBlockK, s.k / 2 / kBlockK * kBlockK);
    } else {
      s.groups = std::max(1, s.groups / 2);
      s.rows.resize(size_t(s.groups));
    }
  }
  while (int64_t(s.total_rows()) * s.n * s.k > limits.max_products) {
    for (int& r : s.rows) r /= 2;
  }
}

// An override's index under another shape: the same coordinates (row and k; group, column and
// k or block), or -1 where they no longer exist.
int64_t RemapIndex(TensorKind kind, uint32_t index, const Shape& from, const Shape& to, int to_rows) {
  const int64_t per_row_from = kind == TensorKind::kScales ? from.k / kBlockK : from.k;
  const int64_t per_row_to = kind == TensorKind::kScales ? to.k / kBlockK : to.k;
  const int64_t row = index / per_row_from, inner = index % per_row_from;
  if (inner >= per_row_to) return -1;
  if (kind == TensorKind::kActivations) return row < to_rows ? row * per_row_to + inner : -1;
  const int64_t group = row / from.n, column = row % from.n;
  if (group >= to.groups || column >= to.n) return -1;
  return (group * to.n + column) * per_row_to + inner;
}

template <typename T>
void ResizeExplicit(std::vector<T>& values, size_t count, CaseRng& rng, T (*fresh)(CaseRng&)) {
  const size_t old = values.size();
  values.resize(count);
  for (size_t i = old; i < count; ++i) values[i] = fresh(rng);
}

uint8_t RandomByte(CaseRng& rng) { return uint8_t(rng()); }

// Gives the case a new shape: byte-by-byte tensors are resized (new elements random) or, when
// they would outgrow the profile, replaced by a recipe; recipes keep every override whose
// coordinates still exist.
void Reshape(FuzzCase& c, CaseRng& rng, const Shape& to, const MutationProfile& p) {
  const Shape from = ShapeOfCase(c);
  c.groups = to.groups;
  c.n = to.n;
  c.k = to.k;
  c.row_offsets.assign(size_t(to.groups) + 1, 0);
  for (int g = 0; g < to.groups; ++g) c.row_offsets[g + 1] = c.row_offsets[g] + to.rows[g];
  for (int kind = 0; kind < kTensorKindCount; ++kind) {
    std::optional<TensorRecipe>& recipe = c.recipes[kind];
    if (!recipe && ExplicitBytes(c, TensorKind(kind)) > p.max_explicit_bytes) ToRecipe(c, rng, TensorKind(kind));
    if (!recipe) continue;
    std::vector<TensorOverride> kept;
    for (const TensorOverride& o : recipe->overrides) {
      const int64_t index = RemapIndex(TensorKind(kind), o.index, from, to, c.rows());
      if (index >= 0) kept.push_back({uint32_t(index), o.value});
    }
    recipe->overrides = std::move(kept);
  }
  if (!c.recipe(TensorKind::kActivations)) {
    ResizeExplicit<uint16_t>(c.activations, c.element_count(TensorKind::kActivations), rng, OrdinaryF16);
  }
  if (!c.recipe(TensorKind::kCodes)) {
    ResizeExplicit<uint8_t>(c.packed_codes, c.element_count(TensorKind::kCodes) / 2, rng, RandomByte);
  }
  if (!c.recipe(TensorKind::kScales)) {
    ResizeExplicit<uint8_t>(c.scale_bytes, c.element_count(TensorKind::kScales), rng, AdmittedScale);
  }
  ClearRecipeVectors(c);
}

const ShapeLimits& LimitsFor(const FuzzCase& c, const MutationProfile& p) {
  return Fits(ShapeOfCase(c), p.small) ? p.small : p.large;
}

void MutateShape(FuzzCase& c, CaseRng& rng, const MutationProfile& p) {
  const ShapeLimits& limits = LimitsFor(c, p);
  Shape s = ShapeOfCase(c);
  switch (rng() % 7) {
    case 0: {
      s.groups = EdgeInt(rng, 1, limits.max_groups);
      const bool sparse = s.groups > 16;  // many experts: nearly all empty, as top-6 routing leaves them
      s.rows.resize(size_t(s.groups), 0);
      for (size_t g = size_t(c.groups); g < s.rows.size(); ++g) s.rows[g] = sparse ? int(OneIn(rng, 40)) : 1;
      break;
    }
    case 1:
      s.rows[rng() % s.rows.size()] = EdgeInt(rng, 0, limits.max_rows_per_group);
      break;
    case 2:
      switch (rng() % 3) {
        case 0:
          s.n = EdgeInt(rng, 1, limits.max_n);
          break;
        case 1:
          s.n = std::min(limits.max_n, 8 * Uniform(rng, 1, 4));
          break;
        default:
          s.n = OneIn(rng, 2) ? s.n * 2 : std::max(1, s.n / 2);
          break;
      }
      break;
    case 3:
      switch (rng() % 3) {
        case 0:
          s.k = kBlockK * EdgeInt(rng, 1, limits.max_k / kBlockK);
          break;
        case 1:
          s.k = std::max(kBlockK, s.k + kBlockK * (OneIn(rng, 2) ? 1 : -1));
          break;
        default:
          s.k = OneIn(rng, 2) ? s.k * 2 : std::max(kBlockK, s.k / 2 / kBlockK * kBlockK);
          break;
      }
      break;
    case 4: {
      // A partial last N tile (or an exact one): N one off a multiple of the tile width.
      const int tile = std::max(1, c.tactic.cta_n);
      s.n = std::max(1, tile * Uniform(rng, 1, 4) + Uniform(rng, -1, 1));
      break;
    }
    case 5:
      // An empty expert before one with rows: the "first row after an empty expert".
      s.rows[rng() % s.rows.size()] = 0;
      if (s.groups > 1) {
        int& next = s.rows[rng() % s.rows.size()];
        next = std::max(next, 1);
      }
      break;
    default:
      // Routing moved: one group's rows to another.
      if (s.groups > 1) {
        const size_t from = rng() % s.rows.size(), to = rng() % s.rows.size();
        s.rows[to] += s.rows[from];
        s.rows[from] = 0;
      }
      break;
  }
  FitShape(s, limits);
  Reshape(c, rng, s, p);
}

// A jump to what a real decode launch looks like.
void JumpToRealShape(FuzzCase& c, CaseRng& rng, const MutationProfile& p) {
  const DecodeShape& real = Pick(rng, kDecodeShapes);
  Shape s{kTopK, real.n, real.k, std::vector<int>(kTopK, 1)};
  auto routed = [&](int experts, int chosen, int rows_each_max) {
    s.groups = experts;
    s.rows.assign(size_t(experts), 0);
    std::vector<int> order(static_cast<size_t>(experts));
    std::iota(order.begin(), order.end(), 0);
    for (int i = 0; i < chosen && i < experts; ++i) {
      std::swap(order[size_t(i)], order[size_t(Uniform(rng, i, experts - 1))]);
      s.rows[size_t(order[size_t(i)])] = Uniform(rng, 1, rows_each_max);
    }
  };
  // Two jumps in three to a decode step's routing (0..2: the campaign's decode class).
  switch (OneIn(rng, 3) ? 3 + rng() % 3 : rng() % 3) {
    case 0:  // one token, top-6 over exactly the chosen experts
      break;
    case 1:  // one token over all 256 routed experts
      routed(kRoutedExperts, kTopK, 1);
      break;
    case 2:  // a few tokens
      routed(OneIn(rng, 2) ? kTopK : kRoutedExperts, kTopK, 4);
      break;
    case 3:  // the shared expert: one group, every token
      s.groups = 1;
      s.rows = {EdgeInt(rng, 1, kMaxRowsPerGroup)};
      break;
    case 4: {  // a full batch: 512 rows (at a smaller N x K the reference can afford)
      static constexpr int kNs[] = {64, 128, 256}, kKs[] = {256, 512};
      s.n = Pick(rng, kNs);
      s.k = Pick(rng, kKs);
      s.groups = kMaxRows / kMaxRowsPerGroup;
      s.rows.assign(size_t(s.groups), kMaxRowsPerGroup);
      break;
    }
    default:  // almost all empty: one expert of 256 owns the rows
      routed(kRoutedExperts, 1, OneIn(rng, 2) ? 1 : kMaxRowsPerGroup);
      break;
  }
  FitShape(s, p.large);
  Reshape(c, rng, s, p);
  if (OneIn(rng, 2)) {
    // The tactic the runner's table picks for it (132 multiprocessors: an H200).
    const Tactic table = TableTactic(ShapeOf(c.n, c.k, c.row_offsets), 132);
    c.tactic = table;
    if (!c.registry.empty()) c.registry[0] = {table, Transform::kOrdinary};
  }
  if (OneIn(rng, 2)) {
    // The checkpoint's scale bytes, exactly or with rare out-of-range bytes.
    TensorRecipe scales{ValueClass::kCheckpoint, OneIn(rng, 2) ? 0 : Uniform(rng, 16, 24), rng(), {}};
    c.recipe(TensorKind::kScales) = scales;
    c.scale_bytes.clear();
  }
}

// ---- the places defects live

// One element's value written where the case keeps it: into the payload, or as an override.
void PlaceElement(FuzzCase& c, CaseRng& rng, TensorKind kind, uint16_t value) {
  const int64_t index = SiteIndex(c, kind, PickSite(c, rng));
  if (index < 0) return;
  std::optional<TensorRecipe>& recipe = c.recipe(kind);
  if (recipe) {
    if (recipe->overrides.size() < size_t(kMaxOverrides)) {
      recipe->overrides.push_back({uint32_t(index), value});
    } else {
      recipe->overrides[rng() % recipe->overrides.size()] = {uint32_t(index), value};
    }
    return;
  }
  switch (kind) {
    case TensorKind::kActivations:
      c.activations[size_t(index)] = value;
      break;
    case TensorKind::kCodes: {
      uint8_t& byte = c.packed_codes[size_t(index) / 2];
      byte = index % 2 == 0 ? uint8_t((byte & 0xF0) | value) : uint8_t((byte & 0x0F) | (value << 4));
      break;
    }
    case TensorKind::kScales:
      c.scale_bytes[size_t(index)] = uint8_t(value);
      break;
  }
}

TensorKind RandomKind(CaseRng& rng) { return TensorKind(rng() % kTensorKindCount); }

void MutateOverrides(FuzzCase& c, CaseRng& rng) {
  const TensorKind kind = RandomKind(rng);
  std::optional<TensorRecipe>& recipe = c.recipe(kind);
  if (!recipe || recipe->overrides.empty()) {
    if (recipe) PlaceElement(c, rng, kind, ElementValue(rng, kind));
    return;
  }
  std::vector<TensorOverride>& overrides = recipe->overrides;
  TensorOverride& o = overrides[rng() % overrides.size()];
  const int64_t elements = int64_t(c.element_count(kind));
  const int64_t row_length = kind == TensorKind::kScales ? c.k / kBlockK : c.k;
  switch (rng() % 6) {
    case 0: {  // to another defect site
      const int64_t index = SiteIndex(c, kind, PickSite(c, rng));
      if (index >= 0) o.index = uint32_t(index);
      break;
    }
    case 1: {  // to a neighbour: the next element, block or row
      const int64_t steps[] = {1, -1, kBlockK, -kBlockK, row_length, -row_length};
      o.index = uint32_t(std::clamp<int64_t>(int64_t(o.index) + Pick(rng, steps), 0, elements - 1));
      break;
    }
    case 2:
      overrides.erase(overrides.begin() + long(&o - overrides.data()));
      break;
    case 3:
      overrides.clear();
      break;
    case 4:
      o.value = ElementValue(rng, kind);
      break;
    default:  // the same value at a neighbour too
      if (overrides.size() < size_t(kMaxOverrides)) {
        const TensorOverride copy{uint32_t(std::min<int64_t>(int64_t(o.index) + 1, elements - 1)), o.value};
        overrides.push_back(copy);
      }
      break;
  }
}

void MutateGenerator(FuzzCase& c, CaseRng& rng, const MutationProfile& p) {
  const TensorKind kind = RandomKind(rng);
  std::optional<TensorRecipe>& recipe = c.recipe(kind);
  if (!recipe) {
    if (OneIn(rng, 2)) {
      ToRecipe(c, rng, kind);
    } else {
      RandomPayload(c, rng, kind);
    }
    return;
  }
  switch (rng() % 5) {
    case 0:
      recipe->value_class = RandomClass(rng, kind);
      break;
    case 1:
      recipe->seed = rng();
      break;
    case 2:
      recipe->rare_log2 = RandomRare(rng);
      break;
    case 3:
      *recipe = RandomRecipe(rng, kind);
      break;
    default:
      // Back to bytes where small: the same values, now open to byte-level mutation.
      if (ExplicitBytes(c, kind) <= p.max_explicit_bytes) {
        switch (kind) {
          case TensorKind::kActivations:
            c.activations.resize(c.element_count(kind));
            MaterializeActivations(*recipe, c.activations, 1);
            break;
          case TensorKind::kCodes:
            c.packed_codes.resize(c.element_count(kind) / 2);
            MaterializeCodes(*recipe, c.packed_codes, 1);
            break;
          case TensorKind::kScales:
            c.scale_bytes.resize(c.element_count(kind));
            MaterializeScales(*recipe, c.scale_bytes, 1);
            break;
        }
        recipe.reset();
      }
      break;
  }
}

void MutateScaleLayer(FuzzCase& c, CaseRng& rng) {
  std::optional<TensorRecipe>& recipe = c.recipe(TensorKind::kScales);
  if (recipe) {
    static constexpr ValueClass kLayers[] = {ValueClass::kCheckpoint, ValueClass::kNormal, ValueClass::kNarrow,
                                             ValueClass::kSpecials};
    recipe->value_class = Pick(rng, kLayers);
    recipe->rare_log2 = OneIn(rng, 2) ? 0 : Uniform(rng, 8, 24);
    return;
  }
  const uint8_t fill = Pick(rng, kInterestingScaleBytes);
  const bool uniform = OneIn(rng, 2);
  for (uint8_t& raw : c.scale_bytes) raw = uniform ? fill : AdmittedScale(rng);
}

void MutateTactic(FuzzCase& c, CaseRng& rng) {
  Tactic& t = c.tactic;
  switch (rng() % 5) {
    case 0:
      t.cta_k = Pick(rng, kInterestingCtaK);
      break;
    case 1: {
      // Splits at the clamp edges of the plan: one chunk per split, one more than the chunks.
      const int chunks = split_chunk_count(c.k, t.cta_k);
      const int choices[] = {1, 2, 3, chunks - 1, chunks, chunks + 1, kMaxSplits};
      t.splits = std::clamp(Pick(rng, choices), 1, kMaxSplits);
      break;
    }
    case 2:
      t = RandomTactic(rng);
      break;
    case 3:
      t.swizzle = Uniform(rng, 0, kMaxSwizzle);
      break;
    default:
      (OneIn(rng, 2) ? t.cta_m : t.cta_n) = EdgeInt(rng, 1, kMaxTileSize);
      break;
  }
}

void MutateRegistry(FuzzCase& c, CaseRng& rng) {
  auto& registry = c.registry;
  switch (rng() % 5) {
    case 0:
      registry.clear();
      registry.push_back({c.tactic, Transform::kOrdinary});
      if (OneIn(rng, 2)) registry.push_back({c.tactic, Transform::kFolded});
      break;
    case 1:
      if (!registry.empty()) registry.erase(registry.begin() + long(rng() % registry.size()));
      break;
    case 2:
      if (registry.size() < size_t(kMaxRegistryEntries)) {
        registry.push_back({OneIn(rng, 2) ? c.tactic : RandomTactic(rng),
                            OneIn(rng, 2) ? Transform::kOrdinary : Transform::kFolded});
      }
      break;
    case 3:
      // A folded instantiation of a tactic that differs from the ordinary one in one field:
      // a mirroring bug would pick it up.
      if (registry.size() < size_t(kMaxRegistryEntries)) {
        Tactic near = c.tactic;
        near.splits = near.splits == 1 ? 2 : near.splits - 1;
        registry.push_back({near, Transform::kFolded});
      }
      break;
    default:
      if (!registry.empty()) {
        RegistryEntry& entry = registry[rng() % registry.size()];
        entry.transform = entry.transform == Transform::kOrdinary ? Transform::kFolded : Transform::kOrdinary;
      }
      break;
  }
}

void MutateRouteSettings(FuzzCase& c, CaseRng& rng) {
  switch (rng() % 3) {
    case 0:
      c.request = TransformRequest(rng() % 3);
      break;
    case 1:
      c.policy = FallbackPolicy(rng() % 2);
      break;
    default:
      c.model = StepModel(rng() % kStepModelCount);
      break;
  }
}

// The mutations as one signature, for the table.
void ScaleElement(FuzzCase& c, CaseRng& rng, const MutationProfile&) {
  PlaceElement(c, rng, TensorKind::kScales, AnyScale(rng));
}
void ScaleLayer(FuzzCase& c, CaseRng& rng, const MutationProfile&) { MutateScaleLayer(c, rng); }
void ActivationInteresting(FuzzCase& c, CaseRng& rng, const MutationProfile&) {
  PlaceElement(c, rng, TensorKind::kActivations, Pick(rng, kInterestingF16));
}
void ActivationAny(FuzzCase& c, CaseRng& rng, const MutationProfile&) {
  PlaceElement(c, rng, TensorKind::kActivations, AnyF16(rng));
}
void CodeElement(FuzzCase& c, CaseRng& rng, const MutationProfile&) {
  PlaceElement(c, rng, TensorKind::kCodes, ElementValue(rng, TensorKind::kCodes));
}
void NewTactic(FuzzCase& c, CaseRng& rng, const MutationProfile&) { MutateTactic(c, rng); }
void RouteSettings(FuzzCase& c, CaseRng& rng, const MutationProfile&) { MutateRouteSettings(c, rng); }
void RegistryEntries(FuzzCase& c, CaseRng& rng, const MutationProfile&) { MutateRegistry(c, rng); }
void Overrides(FuzzCase& c, CaseRng& rng, const MutationProfile&) { MutateOverrides(c, rng); }

// The mutations, one slot each (a name in two slots is drawn twice as often).
constexpr NamedMutation<FuzzCase, CaseRng, MutationProfile> kCaseMutations[] = {
    {"scale-element", ScaleElement},   {"scale-element", ScaleElement},
    {"scale-layer", ScaleLayer},       {"activation-interesting", ActivationInteresting},
    {"activation-any", ActivationAny}, {"code-element", CodeElement},
    {"generator", MutateGenerator},    {"generator", MutateGenerator},
    {"shape", MutateShape},            {"shape", MutateShape},
    {"tactic", NewTactic},                {"route-settings", RouteSettings},
    {"registry", RegistryEntries},            {"overrides", Overrides},
    {"overrides", Overrides},          {"overrides", Overrides},
};

void MutateOnce(FuzzCase& c, CaseRng& rng, const MutationProfile& p) {
  ApplyMutation(Pick(rng, kCaseMutations), c, rng, p);
}

// Pulls an input decoded from the corpus (possibly larger than this target's profile) back
// inside the profile, keeping what fits: beyond `large` always, beyond `small` in one mutation
// of shrink_large_one_in (always where the profile has no real shapes).
void FitProfile(FuzzCase& c, CaseRng& rng, const MutationProfile& p) {
  Shape s = ShapeOfCase(c);
  if (!Fits(s, p.small)) {
    const bool to_small = p.real_shapes_one_in == 0 || OneIn(rng, p.shrink_large_one_in);
    FitShape(s, to_small ? p.small : p.large);
    Reshape(c, rng, s, p);
  }
  for (int kind = 0; kind < kTensorKindCount; ++kind) {
    if (!c.recipes[kind] && ExplicitBytes(c, TensorKind(kind)) > p.max_explicit_bytes) {
      ToRecipe(c, rng, TensorKind(kind));
    }
  }
  ClearRecipeVectors(c);
}

FuzzCase RandomDescription(CaseRng& rng, const MutationProfile& p) {
  FuzzCase c;
  Shape s{Uniform(rng, 1, p.small.max_groups), Uniform(rng, 1, p.small.max_n),
          kBlockK * Uniform(rng, 1, p.small.max_k / kBlockK), {}};
  s.rows.resize(size_t(s.groups));
  for (int& r : s.rows) r = OneIn(rng, 6) ? 0 : Uniform(rng, 1, p.small.max_rows_per_group);
  FitShape(s, p.small);
  ResizeCase(c, s.groups, s.n, s.k, s.rows);
  c.tactic = RandomTactic(rng);
  c.request = TransformRequest(rng() % 3);
  c.policy = FallbackPolicy(rng() % 2);
  c.model = OneIn(rng, 2) ? StepModel::kSm90Emulated : StepModel(rng() % kStepModelCount);
  if (!OneIn(rng, 8)) c.registry.push_back({c.tactic, Transform::kOrdinary});
  if (OneIn(rng, 2)) c.registry.push_back({c.tactic, Transform::kFolded});
  if (OneIn(rng, 4)) c.registry.push_back({RandomTactic(rng), Transform::kFolded});
  for (int kind = 0; kind < kTensorKindCount; ++kind) {
    if (OneIn(rng, 3) || ExplicitBytes(c, TensorKind(kind)) > p.max_explicit_bytes) {
      ToRecipe(c, rng, TensorKind(kind));
    } else {
      RandomPayload(c, rng, TensorKind(kind));
    }
  }
  ClearRecipeVectors(c);
  return c;
}

void MutateDescription(FuzzCase& c, CaseRng& rng, const MutationProfile& p) {
  FitProfile(c, rng, p);
  int count = Uniform(rng, 1, 3);
  if (p.real_shapes_one_in > 0 && OneIn(rng, p.real_shapes_one_in)) {
    RecordMutation("real-shape");
    JumpToRealShape(c, rng, p);
    --count;
  }
  for (int i = 0; i < count; ++i) MutateOnce(c, rng, p);
  ClearRecipeVectors(c);
}

}  // namespace

std::vector<std::string_view> CaseMutationNames() {
  return MutationNamesOf(kCaseMutations);
}

ElementSite PickSite(const FuzzCase& c, CaseRng& rng) {
  ElementSite site;
  // The row (and with it the group whose weights it reads).
  auto after_empty = [&c](int g) { return g > 0 && c.group_rows(g) > 0 && c.group_rows(g - 1) == 0; };
  int candidates = 0;
  if (rng() % 3 == 0) {
    for (int g = 1; g < c.groups; ++g) candidates += after_empty(g);
  }
  if (candidates > 0) {
    for (int g = 1, pick = int(rng() % uint64_t(candidates)); g < c.groups; ++g) {
      if (after_empty(g) && pick-- == 0) {
        site.group = g;
        break;
      }
    }
    site.row = c.row_offsets[size_t(site.group)];
  } else if (c.rows() > 0) {
    site.row = Uniform(rng, 0, c.rows() - 1);
    site.group = c.group_of_row(site.row);
  } else {
    site.group = Uniform(rng, 0, c.groups - 1);
  }
  // The column: the last one (of a partial tile when N is no multiple of the tile) or a tile edge.
  if (rng() % 3 == 0) {
    int tile = c.tactic.cta_n;
    if (!c.registry.empty() && OneIn(rng, 3)) tile = c.registry[rng() % c.registry.size()].tactic.cta_n;
    tile = std::max(tile, 1);
    if (OneIn(rng, 2) || tile >= c.n) {
      site.column = c.n - 1;
    } else {
      const int edge = tile * Uniform(rng, 1, (c.n - 1) / tile);
      site.column = std::min(c.n - 1, OneIn(rng, 2) ? edge - 1 : edge);
    }
  } else {
    site.column = Uniform(rng, 0, c.n - 1);
  }
  // The k: in the last block of a split, or at a 32-element block boundary.
  switch (rng() % 3) {
    case 0: {
      const int splits = effective_splits(c.k, c.tactic.cta_k, c.tactic.splits);
      const KRange range = split_k_range(c.k, c.tactic.cta_k, c.tactic.splits, Uniform(rng, 0, splits - 1));
      const int block_begin = std::max(range.begin, (range.end - 1) / kBlockK * kBlockK);
      site.k = OneIn(rng, 2) ? range.end - 1 : Uniform(rng, block_begin, range.end - 1);
      break;
    }
    case 1: {
      const int block = Uniform(rng, 0, c.k / kBlockK - 1);
      site.k = block * kBlockK + (OneIn(rng, 2) ? 0 : kBlockK - 1);
      break;
    }
    default:
      site.k = Uniform(rng, 0, c.k - 1);
      break;
  }
  return site;
}

int64_t SiteIndex(const FuzzCase& c, TensorKind kind, const ElementSite& site) {
  switch (kind) {
    case TensorKind::kActivations:
      return site.row < 0 ? -1 : int64_t(site.row) * c.k + site.k;
    case TensorKind::kCodes:
      return (int64_t(site.group) * c.n + site.column) * c.k + site.k;
    case TensorKind::kScales:
      return (int64_t(site.group) * c.n + site.column) * (c.k / kBlockK) + site.k / kBlockK;
  }
  return -1;
}

FuzzCase RandomCase(CaseRng& rng, const MutationProfile& profile) {
  FuzzCase c = RandomDescription(rng, profile);
  MaterializeCase(c);
  return c;
}

void MutateCase(FuzzCase& fuzz_case, CaseRng& rng, const MutationProfile& profile) {
  MutateDescription(fuzz_case, rng, profile);
}

size_t MutateEncodedCase(uint8_t* data, size_t size, size_t max_size, unsigned seed,
                         const MutationProfile& profile, const ByteMutator& byte_mutator) {
  CaseRng rng(seed);
  StartMutationSequence(std::span<const uint8_t>(data, size));
  static thread_local FuzzCase c;  // buffers reused across mutations
  if (DecodeCaseInto(std::span<const uint8_t>(data, size), c, Materialize::kNo).ok()) {
    MutateDescription(c, rng, profile);
  } else {
    RecordMutation("random-case");
    c = RandomDescription(rng, profile);
  }
  if (byte_mutator && !c.recipe(TensorKind::kActivations) && !c.activations.empty() && OneIn(rng, 8)) {
    // Size-preserving byte mutation of the activation payload (libFuzzer's own operators
    // plus the dictionary), then back into the structure.
    RecordMutation("activation-bytes");
    static thread_local std::vector<uint8_t> raw;
    raw.resize(c.activations.size() * 2);
    std::memcpy(raw.data(), c.activations.data(), raw.size());
    const size_t mutated = byte_mutator(raw.data(), raw.size(), raw.size());
    std::memcpy(c.activations.data(), raw.data(), std::min(mutated, raw.size()));
  }
  for (int attempt = 0; EncodedSize(c) > max_size; ++attempt) {
    if (attempt == 12) return 0;
    if (attempt == 0) RecordMutation("fit-max-len");
    // First the largest byte-by-byte tensor becomes a recipe (the shape stays), then the shape halves.
    int largest = -1;
    for (int kind = 0; kind < kTensorKindCount; ++kind) {
      if (!c.recipes[kind] && ExplicitBytes(c, TensorKind(kind)) > 0 &&
          (largest < 0 || ExplicitBytes(c, TensorKind(kind)) > ExplicitBytes(c, TensorKind(largest)))) {
        largest = kind;
      }
    }
    if (largest >= 0) {
      ToRecipe(c, rng, TensorKind(largest));
      ClearRecipeVectors(c);
      continue;
    }
    Shape s = ShapeOfCase(c);
    for (int& r : s.rows) r /= 2;
    s.groups = std::max(1, s.groups / 2);
    s.rows.resize(size_t(s.groups));
    s.n = std::max(1, s.n / 2);
    s.k = kBlockK;
    Reshape(c, rng, s, profile);
    for (std::optional<TensorRecipe>& recipe : c.recipes) {
      if (recipe) recipe->overrides.clear();
    }
  }
  static thread_local std::vector<uint8_t> encoded;
  if (!EncodeCaseInto(c, encoded).ok()) return 0;  // unreachable for a case built here; the test asserts it
  std::memcpy(data, encoded.data(), encoded.size());
  FinishMutationSequence(encoded);
  return encoded.size();
}

}  // namespace mxdiff::fuzz
