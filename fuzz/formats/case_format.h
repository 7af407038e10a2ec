// The fuzz case: one versioned binary format shared by every fuzz target, the corpus, the
// mutator and tools/repro (layout documented in fuzz/README.md). Decoding is total and strict:
// any byte string either becomes a case within the bounds below or is rejected with a Status
// that names the offending field; nothing is clamped or guessed. The encoder writes version 2;
// the decoder also reads version 1 (every v1 file of corpus/ stays a valid case).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fuzz/formats/tensor_recipe.h"
#include "kernels/route.h"
#include "reference/problem.h"
#include "reference/step_model.h"
#include "reference/tactic_limits.h"

namespace mxdiff::fuzz {

inline constexpr char kCaseMagic[4] = {'M', 'X', 'D', 'F'};
inline constexpr uint8_t kCaseVersion = 2;        // what the encoder writes
inline constexpr uint8_t kOldestCaseVersion = 1;  // the oldest the decoder reads

// The shape bounds of one format version: the one place they are written.
struct FormatBounds {
  int groups_bytes;  // width of the groups field
  int max_groups;
  int max_rows_per_group;
  int max_rows;  // in all groups together
  int max_n;
  int max_k;
  // groups x N x K: what a decoded case materializes (codes N K / 2 and scales N K / 32 bytes per
  // group). 2^30 is the real 256-expert decode at W13 PP2 x TP4 (256 x 1024 x 4096, 570 MB
  // materialized): one decoded copy stays well inside libFuzzer's default 2 GB RSS limit.
  int64_t max_weight_elements;
};
// Version 1: the first format (no recipes, every payload byte by byte).
inline constexpr FormatBounds kV1Bounds{1, 8, 16, 8 * 16, 256, 512, int64_t{8} * 256 * 512};
// Version 2: the real decode shapes (docs/numerics.md: shapes): 256 routed experts, any
// distribution of rows (top-6 routing leaves nearly all empty), N and K to 8192.
inline constexpr FormatBounds kV2Bounds{2, 256, 64, 512, 8192, 8192, int64_t{1} << 30};

inline constexpr int kMaxGroups = kV2Bounds.max_groups;
inline constexpr int kMaxRowsPerGroup = kV2Bounds.max_rows_per_group;
inline constexpr int kMaxRows = kV2Bounds.max_rows;
inline constexpr int kMaxN = kV2Bounds.max_n;
inline constexpr int kMaxK = kV2Bounds.max_k;
inline constexpr int64_t kMaxWeightElements = kV2Bounds.max_weight_elements;
inline constexpr int kMaxTileSize = 256;  // cta_m, cta_n (cta_k: kMaxCtaK of tactic_limits.h)
inline constexpr int kMaxSplits = mxdiff::kMaxSplits;
// Past the builtin kernels' kMaxSwizzleLog2 on purpose: they must reject those cleanly.
inline constexpr int kMaxSwizzle = 7;
inline constexpr int kMaxRegistryEntries = 8;
inline constexpr int kMaxOverrides = 64;  // per tensor recipe
// A tensor stored byte by byte holds at most this much (a version 1 case of the largest shape
// holds 512 KB of codes); larger tensors are described by a recipe.
inline constexpr size_t kMaxExplicitTensorBytes = size_t{1} << 20;

struct RegistryEntry {
  Tactic tactic;
  Transform transform = Transform::kOrdinary;

  friend bool operator==(const RegistryEntry&, const RegistryEntry&) = default;
};

struct FuzzCase {
  int groups = 1;
  int n = 1;
  int k = 32;
  std::vector<int32_t> row_offsets{0, 0};  // groups + 1 entries
  Tactic tactic;                           // the ordinary tactic the dispatch starts from
  TransformRequest request = TransformRequest::kAuto;
  FallbackPolicy policy = FallbackPolicy::kFallback;
  StepModel model = StepModel::kSm90Emulated;
  // The kernel registry fuzz_dispatch decides over (other targets ignore it).
  std::vector<RegistryEntry> registry;
  // The payloads every consumer reads (the reference, the kernels, the targets), in the layouts
  // of reference/problem.h. A tensor with a recipe below is the recipe's materialization (done
  // by the decoder and MaterializeCase), or empty where the case was decoded without it.
  std::vector<uint16_t> activations;  // rows() x k fp16 bits
  std::vector<uint8_t> packed_codes;  // groups x n x k/2
  std::vector<uint8_t> scale_bytes;   // groups x n x k/32
  // How each payload is stored, indexed by TensorKind: nullopt = byte by byte (the vector above
  // is the description), else a generator recipe plus overrides (fuzz/formats/tensor_recipe.h).
  std::array<std::optional<TensorRecipe>, kTensorKindCount> recipes;

  int rows() const { return row_offsets.empty() ? 0 : row_offsets.back(); }
  int group_rows(int group) const { return row_offsets[size_t(group) + 1] - row_offsets[size_t(group)]; }
  // The group that owns row `row` (0 <= row < rows()): the last g with row_offsets[g] <= row,
  // so empty groups are skipped.
  int group_of_row(int row) const;
  // The groups that own at least one row, ascending: the only ones whose weights reach the
  // output (a top-6 decode over 256 experts: 6 of 256). Every group's weights are still
  // materialized: the layer's admission reads all scale bytes, and the kernels get the layer.
  std::vector<int> GroupsWithRows() const;
  std::optional<TensorRecipe>& recipe(TensorKind kind) { return recipes[size_t(kind)]; }
  const std::optional<TensorRecipe>& recipe(TensorKind kind) const { return recipes[size_t(kind)]; }
  // Whether the weights (codes and scales) both come from recipes, not literal bytes.
  bool WeightsFromRecipes() const {
    return recipe(TensorKind::kCodes).has_value() && recipe(TensorKind::kScales).has_value();
  }
  // Elements of a tensor for this shape (codes count codes, two per packed byte).
  size_t element_count(TensorKind kind) const;
  // A view for the reference and the kernels; valid while this case lives and is not resized.
  GroupedProblem Problem() const;
  KernelRegistry Registry() const;

  friend bool operator==(const FuzzCase&, const FuzzCase&) = default;
};

// Sets row_offsets from per-group row counts and sizes every payload for the shape
// (new elements zero; recipes are kept, call MaterializeCase to refill them). Does not validate.
void ResizeCase(FuzzCase& fuzz_case, int groups, int n, int k, std::span<const int> rows_per_group);

// What MaterializeCase last wrote into one case object's recipe tensors. Handed back with the
// same case, it lets the next materialization regenerate only what differs: most mutations
// keep a tensor's generator and move its overrides, the tactic or another tensor. Valid only
// while nothing else writes that case's tensors (the fuzz loop's decode buffer).
struct MaterializationMemo {
  struct Tensor {
    bool valid = false;
    size_t elements = 0;
    TensorRecipe generator;                 // overrides empty
    std::vector<uint32_t> override_indices;  // of the recipe last materialized
  };
  std::array<Tensor, kTensorKindCount> tensors;
};

// kNo leaves recipe tensors' vectors empty: the mutator works on the description alone and
// never pays for 0.5 GB of weights it would not read. kAllButWeights leaves a recipe's codes and
// scales empty (fuzz_gemm's device way: the device materializes them).
enum class Materialize { kYes, kNo, kAllButWeights };

// Sizes every recipe tensor's vector for the shape and fills it from its recipe (explicit
// payloads are left as they are). `threads` as in tensor_recipe.h (0: by size and hardware).
void MaterializeCase(FuzzCase& fuzz_case, int threads = 0, MaterializationMemo* memo = nullptr,
                     Materialize what = Materialize::kYes);

// Checks every bound and every explicit payload's size; the decoder and encoder both apply it.
// A recipe tensor's vector must be empty or of the shape's size.
absl::Status ValidateCase(const FuzzCase& fuzz_case);

absl::StatusOr<FuzzCase> DecodeCase(std::span<const uint8_t> bytes);
// The same into an existing case, reusing its buffers (the fuzz loop decodes without
// allocating); on error the case is unspecified.
absl::Status DecodeCaseInto(std::span<const uint8_t> bytes, FuzzCase& fuzz_case,
                            Materialize materialize = Materialize::kYes, MaterializationMemo* memo = nullptr);
// DecodeCaseInto's first half, for a caller that chooses what to materialize from the fields
// (fuzz_gemm decodes each input once): the fields and explicit payloads, the recipe tensors'
// vectors left as they were (stale until MaterializeCase, which the memo keeps cheap).
absl::Status DecodeCaseFields(std::span<const uint8_t> bytes, FuzzCase& fuzz_case, MaterializationMemo* memo = nullptr);
// InvalidArgument if the case is out of bounds (so no invalid file is ever written).
absl::StatusOr<std::vector<uint8_t>> EncodeCase(const FuzzCase& fuzz_case);
// Encodes into `out` (cleared first, capacity reused).
absl::Status EncodeCaseInto(const FuzzCase& fuzz_case, std::vector<uint8_t>& out);
// The encoded size of a valid case, without encoding it.
size_t EncodedSize(const FuzzCase& fuzz_case);
// The largest encoded size any valid case has (every bound at its maximum, every tensor the
// larger of its byte-by-byte and recipe forms); computed, nothing allocated.
size_t MaxEncodedSize();

// Multi-line readable description (shape, tactic, request, policy, model, registry, each
// tensor's recipe with its overrides at their coordinates, payload summary with scale-byte
// classes), used by tools/repro and the findings writer.
std::string DescribeCase(const FuzzCase& fuzz_case);

}  // namespace mxdiff::fuzz
