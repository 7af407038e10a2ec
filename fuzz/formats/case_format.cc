#include "fuzz/formats/case_format.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <map>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "fuzz/formats/byte_cursor.h"
#include "reference/scale_class.h"
#include "reference/split_plan.h"

namespace mxdiff::fuzz {
namespace {

template <typename Cursor>
absl::Status VisitTactic(Cursor& io, const char* prefix, Tactic& tactic) {
  MXDIFF_RETURN_IF_ERROR(io.Int(prefix, ".cta_m", 2, 1, kMaxTileSize, tactic.cta_m));
  MXDIFF_RETURN_IF_ERROR(io.Int(prefix, ".cta_n", 2, 1, kMaxTileSize, tactic.cta_n));
  MXDIFF_RETURN_IF_ERROR(io.Int(prefix, ".cta_k", 2, 4, kMaxCtaK, tactic.cta_k));
  if (tactic.cta_k % 4 != 0) {
    return absl::InvalidArgumentError(fmt::format("{}.cta_k = {} is not a multiple of 4", prefix, tactic.cta_k));
  }
  MXDIFF_RETURN_IF_ERROR(io.Int(prefix, ".splits", 2, 1, kMaxSplits, tactic.splits));
  return io.Int(prefix, ".swizzle", 1, 0, kMaxSwizzle, tactic.swizzle);
}

template <typename Enum, typename Cursor>
absl::Status VisitEnum(Cursor& io, const char* field, int count, Enum& value) {
  int raw = int(value);
  MXDIFF_RETURN_IF_ERROR(io.Int("", field, 1, 0, count - 1, raw));
  value = Enum(raw);
  return absl::OkStatus();
}

// One payload tensor (version 2): byte by byte, or a recipe with its overrides.
template <typename Cursor, typename T>
absl::Status VisitTensor(Cursor& io, FuzzCase& c, TensorKind kind, std::vector<T>& payload) {
  const char* name = TensorKindName(kind);
  std::optional<TensorRecipe>& recipe = c.recipe(kind);
  int source = recipe.has_value() ? 1 : 0;
  MXDIFF_RETURN_IF_ERROR(io.Int(name, ".source", 1, 0, 1, source));
  if constexpr (Cursor::kDecoding) {
    if (source == 0) recipe.reset();
    else if (!recipe.has_value()) recipe.emplace();
  }
  const size_t elements = c.element_count(kind);
  if (!recipe.has_value()) {
    const size_t count = kind == TensorKind::kCodes ? elements / 2 : elements;
    if (count * sizeof(T) > kMaxExplicitTensorBytes) {
      return absl::InvalidArgumentError(
          fmt::format("{} byte by byte would take {} bytes, more than the {} an explicit payload may hold: describe "
                      "it by a recipe",
                      name, count * sizeof(T), kMaxExplicitTensorBytes));
    }
    return io.Array(name, payload, count);
  }
  TensorRecipe& r = *recipe;
  int value_class = int(r.value_class);
  MXDIFF_RETURN_IF_ERROR(io.Int(name, ".class", 1, 0, kValueClassCount - 1, value_class));
  if (!ValueClassAllowed(kind, ValueClass(value_class))) {
    return absl::InvalidArgumentError(fmt::format("{}.class = {} ({}) is not a class of {}", name, value_class,
                                                  ValueClassName(ValueClass(value_class)), name));
  }
  r.value_class = ValueClass(value_class);
  MXDIFF_RETURN_IF_ERROR(io.Int(name, ".rare_log2", 1, 0, kMaxRareLog2, r.rare_log2));
  MXDIFF_RETURN_IF_ERROR(io.U64(name, ".seed", r.seed));
  int count = int(r.overrides.size());
  MXDIFF_RETURN_IF_ERROR(io.Int(name, ".override_count", 1, 0, kMaxOverrides, count));
  if constexpr (Cursor::kDecoding) r.overrides.resize(size_t(count));
  const int last_index = int(elements) - 1;  // elements <= 2^30
  for (TensorOverride& o : r.overrides) {
    int index = o.index > uint32_t(kMaxWeightElements) ? -1 : int(o.index);
    MXDIFF_RETURN_IF_ERROR(io.Int(name, ".override.index", 4, 0, last_index, index));
    int value = o.value;
    MXDIFF_RETURN_IF_ERROR(io.Int(name, ".override.value", 2, 0, MaxElementValue(kind), value));
    o.index = uint32_t(index);
    o.value = uint16_t(value);
  }
  return absl::OkStatus();
}

// The one field list of every format version (fuzz/README.md mirrors it): the encoder walks it
// as version 2, the decoder as the version the input names.
template <typename Cursor>
absl::Status VisitCase(Cursor& io, FuzzCase& c) {
  int magic[4] = {kCaseMagic[0], kCaseMagic[1], kCaseMagic[2], kCaseMagic[3]};
  for (int i = 0; i < 4; ++i) {
    MXDIFF_RETURN_IF_ERROR(io.Int("", "magic", 1, kCaseMagic[i], kCaseMagic[i], magic[i]));
  }
  int version = kCaseVersion;
  MXDIFF_RETURN_IF_ERROR(
      io.Int("", "version", 1, Cursor::kDecoding ? kOldestCaseVersion : kCaseVersion, kCaseVersion, version));
  const FormatBounds& bounds = version == 1 ? kV1Bounds : kV2Bounds;
  MXDIFF_RETURN_IF_ERROR(io.Int("", "groups", bounds.groups_bytes, 1, bounds.max_groups, c.groups));
  MXDIFF_RETURN_IF_ERROR(io.Int("", "n", 2, 1, bounds.max_n, c.n));
  MXDIFF_RETURN_IF_ERROR(io.Int("", "k", 2, kBlockK, bounds.max_k, c.k));
  if (c.k % kBlockK != 0) {
    return absl::InvalidArgumentError(fmt::format("k = {} is not a multiple of {}", c.k, kBlockK));
  }
  if (const int64_t weights = int64_t(c.groups) * c.n * c.k; weights > bounds.max_weight_elements) {
    return absl::InvalidArgumentError(fmt::format("groups x n x k = {} x {} x {} = {} weights, more than {}", c.groups,
                                                  c.n, c.k, weights, bounds.max_weight_elements));
  }
  MXDIFF_RETURN_IF_ERROR(VisitEnum(io, "model", kStepModelCount, c.model));
  MXDIFF_RETURN_IF_ERROR(VisitEnum(io, "request", 3, c.request));
  MXDIFF_RETURN_IF_ERROR(VisitEnum(io, "policy", 2, c.policy));
  MXDIFF_RETURN_IF_ERROR(VisitTactic(io, "tactic", c.tactic));
  int registry_count = int(c.registry.size());
  MXDIFF_RETURN_IF_ERROR(io.Int("", "registry_count", 1, 0, kMaxRegistryEntries, registry_count));
  if constexpr (Cursor::kDecoding) c.registry.resize(registry_count);
  for (RegistryEntry& entry : c.registry) {
    MXDIFF_RETURN_IF_ERROR(VisitTactic(io, "registry.tactic", entry.tactic));
    MXDIFF_RETURN_IF_ERROR(VisitEnum(io, "registry.transform", kTransformCount, entry.transform));
  }
  if constexpr (Cursor::kDecoding) c.row_offsets.assign(size_t(c.groups) + 1, 0);
  if (c.row_offsets.size() != size_t(c.groups) + 1 || c.row_offsets[0] != 0) {
    return absl::InvalidArgumentError("row_offsets must have groups + 1 entries starting at 0");
  }
  for (int g = 0; g < c.groups; ++g) {
    int rows = c.row_offsets[g + 1] - c.row_offsets[g];
    MXDIFF_RETURN_IF_ERROR(io.Int("", "rows", 1, 0, bounds.max_rows_per_group, rows));
    if constexpr (Cursor::kDecoding) c.row_offsets[g + 1] = c.row_offsets[g] + rows;
  }
  if (c.rows() > bounds.max_rows) {
    return absl::InvalidArgumentError(
        fmt::format("rows total = {} (the sum over {} groups) is more than {}", c.rows(), c.groups, bounds.max_rows));
  }
  static_assert(std::endian::native == std::endian::little, "the payload is copied as little-endian");
  if (version == 1) {  // every payload byte by byte
    if constexpr (Cursor::kDecoding) c.recipes = {};
    const size_t groups = size_t(c.groups), n = size_t(c.n), k = size_t(c.k);
    MXDIFF_RETURN_IF_ERROR(io.Array("activations", c.activations, size_t(c.rows()) * k));
    MXDIFF_RETURN_IF_ERROR(io.Array("packed_codes", c.packed_codes, groups * n * k / 2));
    return io.Array("scale_bytes", c.scale_bytes, groups * n * k / kBlockK);
  }
  MXDIFF_RETURN_IF_ERROR(VisitTensor(io, c, TensorKind::kActivations, c.activations));
  MXDIFF_RETURN_IF_ERROR(VisitTensor(io, c, TensorKind::kCodes, c.packed_codes));
  return VisitTensor(io, c, TensorKind::kScales, c.scale_bytes);
}

std::string ScaleClassSummary(std::span<const uint8_t> scales) {
  std::array<size_t, kScaleClassCount> per_class{};
  std::map<int, size_t> histogram;
  for (uint8_t raw : scales) {
    ++per_class[size_t(ClassifyScale(raw))];
    ++histogram[raw];
  }
  std::string text;
  for (int i = 0; i < kScaleClassCount; ++i) {
    text += fmt::format("{}{}: {}", i == 0 ? "" : ", ", ScaleClassName(ScaleClass(i)), per_class[size_t(i)]);
  }
  text += "; raw bytes:";
  int shown = 0;
  for (const auto& [raw, count] : histogram) {
    if (++shown > 12) {
      text += " ...";
      break;
    }
    text += fmt::format(" {}x{}", raw, count);
  }
  return text;
}

}  // namespace

GroupedProblem FuzzCase::Problem() const {
  GroupedProblem problem;
  problem.groups = groups;
  problem.n = n;
  problem.k = k;
  problem.row_offsets = row_offsets;
  problem.activations = activations;
  problem.packed_codes = packed_codes;
  problem.scale_bytes = scale_bytes;
  return problem;
}

KernelRegistry FuzzCase::Registry() const {
  KernelRegistry result;
  for (const RegistryEntry& entry : registry) result.Add(entry.tactic, entry.transform);
  return result;
}

int FuzzCase::group_of_row(int row) const {
  return int(std::upper_bound(row_offsets.begin(), row_offsets.end(), row) - row_offsets.begin()) - 1;
}

std::vector<int> FuzzCase::GroupsWithRows() const {
  std::vector<int> result;
  for (int g = 0; g < groups; ++g) {
    if (group_rows(g) > 0) result.push_back(g);
  }
  return result;
}

size_t FuzzCase::element_count(TensorKind kind) const {
  const size_t weights = size_t(groups) * size_t(n) * size_t(k);
  switch (kind) {
    case TensorKind::kActivations:
      return size_t(rows()) * size_t(k);
    case TensorKind::kCodes:
      return weights;
    case TensorKind::kScales:
      return weights / kBlockK;
  }
  return 0;
}

void ResizeCase(FuzzCase& c, int groups, int n, int k, std::span<const int> rows_per_group) {
  c.groups = groups;
  c.n = n;
  c.k = k;
  c.row_offsets.assign(size_t(groups) + 1, 0);
  for (int g = 0; g < groups; ++g) {
    c.row_offsets[g + 1] = c.row_offsets[g] + (size_t(g) < rows_per_group.size() ? rows_per_group[g] : 0);
  }
  c.activations.resize(size_t(c.rows()) * size_t(k));
  c.packed_codes.resize(size_t(groups) * size_t(n) * size_t(k) / 2);
  c.scale_bytes.resize(size_t(groups) * size_t(n) * size_t(k) / kBlockK);
}

namespace {

std::span<uint8_t> TensorBytesOf(FuzzCase& c, TensorKind kind) {
  switch (kind) {
    case TensorKind::kActivations:
      return {reinterpret_cast<uint8_t*>(c.activations.data()), c.activations.size() * 2};
    case TensorKind::kCodes:
      return c.packed_codes;
    case TensorKind::kScales:
      return c.scale_bytes;
  }
  return {};
}

}  // namespace

void MaterializeCase(FuzzCase& c, int threads, MaterializationMemo* memo, Materialize what) {
  for (int index = 0; index < kTensorKindCount; ++index) {
    const TensorKind kind = TensorKind(index);
    const std::optional<TensorRecipe>& recipe = c.recipe(kind);
    MaterializationMemo::Tensor* remembered = memo != nullptr ? &memo->tensors[size_t(index)] : nullptr;
    if (!recipe || (kind != TensorKind::kActivations && what == Materialize::kAllButWeights)) {
      if (remembered != nullptr) remembered->valid = false;
      if (recipe) (kind == TensorKind::kCodes ? c.packed_codes : c.scale_bytes).clear();
      continue;
    }
    const size_t elements = c.element_count(kind);
    const size_t stored = kind == TensorKind::kCodes ? c.packed_codes.size() * 2
                          : kind == TensorKind::kActivations ? c.activations.size()
                                                             : c.scale_bytes.size();
    if (remembered != nullptr && remembered->valid && remembered->elements == elements && stored == elements &&
        SameGenerator(remembered->generator, *recipe)) {
      RematerializeOverrides(kind, *recipe, remembered->override_indices, TensorBytesOf(c, kind));
    } else {
      switch (kind) {
        case TensorKind::kActivations:
          c.activations.resize(elements);
          MaterializeActivations(*recipe, c.activations, threads);
          break;
        case TensorKind::kCodes:
          c.packed_codes.resize(elements / 2);
          MaterializeCodes(*recipe, c.packed_codes, threads);
          break;
        case TensorKind::kScales:
          c.scale_bytes.resize(elements);
          MaterializeScales(*recipe, c.scale_bytes, threads);
          break;
      }
    }
    if (remembered != nullptr) {
      remembered->valid = true;
      remembered->elements = elements;
      remembered->generator = TensorRecipe{recipe->value_class, recipe->rare_log2, recipe->seed, {}};
      remembered->override_indices.clear();
      for (const TensorOverride& o : recipe->overrides) remembered->override_indices.push_back(o.index);
    }
  }
}

absl::Status ValidateCase(const FuzzCase& fuzz_case) {
  std::vector<uint8_t> scratch;
  scratch.reserve(EncodedSize(fuzz_case));
  ByteWriter writer(scratch);
  // VisitCase takes a mutable case for the decoder's sake; the writer never changes it.
  MXDIFF_RETURN_IF_ERROR(VisitCase(writer, const_cast<FuzzCase&>(fuzz_case)));
  const size_t sizes[kTensorKindCount] = {fuzz_case.activations.size(), fuzz_case.packed_codes.size() * 2,
                                          fuzz_case.scale_bytes.size()};
  for (int kind = 0; kind < kTensorKindCount; ++kind) {
    const size_t expected = fuzz_case.element_count(TensorKind(kind));
    if (fuzz_case.recipes[kind].has_value() && sizes[kind] != 0 && sizes[kind] != expected) {
      return absl::InvalidArgumentError(fmt::format("{} has {} elements materialized, the shape needs {}",
                                                    TensorKindName(TensorKind(kind)), sizes[kind], expected));
    }
  }
  return absl::OkStatus();
}

absl::Status DecodeCaseFields(std::span<const uint8_t> bytes, FuzzCase& fuzz_case, MaterializationMemo* memo) {
  ByteReader reader(bytes, "case");
  absl::Status status = VisitCase(reader, fuzz_case);
  if (status.ok() && reader.offset() != reader.size()) {
    status = absl::InvalidArgumentError(fmt::format("{} trailing bytes after the case (expected {} bytes in all)",
                                                    reader.size() - reader.offset(), reader.offset()));
  }
  if (!status.ok() && memo != nullptr) *memo = {};  // the reader may have written any payload vector
  return status;
}

absl::Status DecodeCaseInto(std::span<const uint8_t> bytes, FuzzCase& fuzz_case, Materialize materialize,
                            MaterializationMemo* memo) {
  MXDIFF_RETURN_IF_ERROR(DecodeCaseFields(bytes, fuzz_case, memo));
  if (materialize != Materialize::kNo) {
    MaterializeCase(fuzz_case, 0, memo, materialize);
  } else {
    if (memo != nullptr) *memo = {};
    if (fuzz_case.recipe(TensorKind::kActivations)) fuzz_case.activations.clear();
    if (fuzz_case.recipe(TensorKind::kCodes)) fuzz_case.packed_codes.clear();
    if (fuzz_case.recipe(TensorKind::kScales)) fuzz_case.scale_bytes.clear();
  }
  return absl::OkStatus();
}

absl::StatusOr<FuzzCase> DecodeCase(std::span<const uint8_t> bytes) {
  FuzzCase fuzz_case;
  MXDIFF_RETURN_IF_ERROR(DecodeCaseInto(bytes, fuzz_case));
  return fuzz_case;
}

absl::Status EncodeCaseInto(const FuzzCase& fuzz_case, std::vector<uint8_t>& out) {
  out.clear();
  out.reserve(EncodedSize(fuzz_case));
  ByteWriter writer(out);
  return VisitCase(writer, const_cast<FuzzCase&>(fuzz_case));  // the writer only reads
}

absl::StatusOr<std::vector<uint8_t>> EncodeCase(const FuzzCase& fuzz_case) {
  std::vector<uint8_t> bytes;
  MXDIFF_RETURN_IF_ERROR(EncodeCaseInto(fuzz_case, bytes));
  return bytes;
}

namespace {

// magic, version, groups, n, k, model, request, policy, tactic, registry count (version 2).
constexpr size_t kHeaderBytes = 4 + 1 + 2 + 2 + 2 + 3 + 9 + 1;
constexpr size_t kRegistryEntryBytes = 10;
// source, class, rare_log2, seed, override count; then index u32 and value u16 per override.
constexpr size_t kRecipeBytes = 1 + 1 + 1 + 8 + 1;
constexpr size_t kOverrideBytes = 4 + 2;

size_t TensorBytes(const std::optional<TensorRecipe>& recipe, size_t payload_bytes) {
  return recipe ? kRecipeBytes + recipe->overrides.size() * kOverrideBytes : 1 + payload_bytes;
}

// "[row 3, k 31]", "[group 1, n 127, k 4095]", "[group 1, n 127, block 127]"
std::string OverrideAt(const FuzzCase& c, TensorKind kind, uint32_t index) {
  switch (kind) {
    case TensorKind::kActivations:
      return fmt::format("[row {}, k {}]", index / uint32_t(c.k), index % uint32_t(c.k));
    case TensorKind::kCodes: {
      const uint32_t row = index / uint32_t(c.k);
      return fmt::format("[group {}, n {}, k {}]", row / uint32_t(c.n), row % uint32_t(c.n), index % uint32_t(c.k));
    }
    case TensorKind::kScales: {
      const uint32_t blocks = uint32_t(c.k / kBlockK), row = index / blocks;
      return fmt::format("[group {}, n {}, block {} = k {}..{}]", row / uint32_t(c.n), row % uint32_t(c.n),
                         index % blocks, index % blocks * kBlockK, index % blocks * kBlockK + kBlockK - 1);
    }
  }
  return "?";
}

}  // namespace

size_t EncodedSize(const FuzzCase& c) {
  return kHeaderBytes + c.registry.size() * kRegistryEntryBytes + size_t(c.groups) +
         TensorBytes(c.recipe(TensorKind::kActivations), c.activations.size() * 2) +
         TensorBytes(c.recipe(TensorKind::kCodes), c.packed_codes.size()) +
         TensorBytes(c.recipe(TensorKind::kScales), c.scale_bytes.size());
}

size_t MaxEncodedSize() {
  const size_t tensor = std::max(1 + kMaxExplicitTensorBytes, kRecipeBytes + kMaxOverrides * kOverrideBytes);
  return kHeaderBytes + kMaxRegistryEntries * kRegistryEntryBytes + size_t(kMaxGroups) + kTensorKindCount * tensor;
}

std::string DescribeCase(const FuzzCase& c) {
  std::string text = fmt::format("case: groups {}, ", c.groups);
  if (c.groups <= 16) {
    text += "rows";
    for (int g = 0; g < c.groups; ++g) text += fmt::format(" {}", c.group_rows(g));
  } else {
    const std::vector<int> owning = c.GroupsWithRows();
    text += fmt::format("{} with rows:", owning.size());
    for (size_t i = 0; i < owning.size() && i < 16; ++i) text += fmt::format(" g{}={}", owning[i], c.group_rows(owning[i]));
    if (owning.size() > 16) text += " ...";
  }
  text += fmt::format(" (M = {}), N = {}, K = {}\n", c.rows(), c.n, c.k);
  text += fmt::format("  tactic {} ({} effective splits), request {}, policy {}, model {}\n",
                      TacticName(c.tactic), effective_splits(c.k, c.tactic.cta_k, c.tactic.splits),
                      TransformRequestName(c.request), FallbackPolicyName(c.policy), StepModelName(c.model));
  text += fmt::format("  registry ({} entries):", c.registry.size());
  for (const RegistryEntry& entry : c.registry) {
    text += fmt::format(" {}:{}", TacticName(entry.tactic), TransformName(entry.transform));
  }
  text += "\n";
  for (int kind = 0; kind < kTensorKindCount; ++kind) {
    const std::optional<TensorRecipe>& recipe = c.recipes[kind];
    text += fmt::format("  {}: ", TensorKindName(TensorKind(kind)));
    if (!recipe) {
      text += "byte by byte\n";
      continue;
    }
    text += fmt::format("recipe {}", DescribeRecipe(*recipe));
    for (size_t i = 0; i < recipe->overrides.size() && i < 12; ++i) {
      const TensorOverride& o = recipe->overrides[i];
      text += fmt::format("{} {} = 0x{:x}", i == 0 ? ":" : ";", OverrideAt(c, TensorKind(kind), o.index), o.value);
    }
    text += recipe->overrides.size() > 12 ? "; ...\n" : "\n";
  }
  text += fmt::format("  scales ({}): {}\n", c.scale_bytes.size(), ScaleClassSummary(c.scale_bytes));
  size_t specials = 0;
  for (uint16_t a : c.activations) specials += (a & 0x7C00) == 0x7C00 || (a & 0x7C00) == 0 ? 1 : 0;
  text += fmt::format("  activations: {} values, {} zero/subnormal/Inf/NaN\n", c.activations.size(), specials);
  return text;
}

}  // namespace mxdiff::fuzz
