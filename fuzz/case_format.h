// The fuzz case: one versioned binary format shared by every fuzz target, the corpus, the
// mutator and tools/repro (layout documented in fuzz/README.md). Decoding is total and strict:
// any byte string either becomes a case within the bounds below or is rejected with a Status
// that names the offending field; nothing is clamped or guessed.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/route.h"
#include "reference/problem.h"
#include "reference/step_model.h"

namespace mxdiff::fuzz {

inline constexpr char kCaseMagic[4] = {'M', 'X', 'D', 'F'};
inline constexpr uint8_t kCaseVersion = 1;

// Bounds that keep one input fast (every target runs a case in well under a millisecond
// at the sizes the mutator profiles choose; these are the format's hard limits).
inline constexpr int kMaxGroups = 8;
inline constexpr int kMaxRowsPerGroup = 16;
inline constexpr int kMaxN = 256;
inline constexpr int kMaxK = 512;
inline constexpr int kMaxTileSize = 256;  // cta_m, cta_n, cta_k
inline constexpr int kMaxSplits = mxdiff::kMaxSplits;
// Past the builtin kernels' kMaxSwizzleLog2 on purpose: they must reject those cleanly.
inline constexpr int kMaxSwizzle = 7;
inline constexpr int kMaxRegistryEntries = 8;

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
  std::vector<uint16_t> activations;  // rows() x k fp16 bits
  std::vector<uint8_t> packed_codes;  // groups x n x k/2
  std::vector<uint8_t> scale_bytes;   // groups x n x k/32

  int rows() const { return row_offsets.empty() ? 0 : row_offsets.back(); }
  // A view for the reference and the kernels; valid while this case lives and is not resized.
  GroupedProblem Problem() const;
  KernelRegistry Registry() const;

  friend bool operator==(const FuzzCase&, const FuzzCase&) = default;
};

// Sets row_offsets from per-group row counts and sizes every payload for the shape
// (new elements zero). Does not validate.
void ResizeCase(FuzzCase& fuzz_case, int groups, int n, int k, std::span<const int> rows_per_group);

// Checks every bound and every span size; the decoder and encoder both apply it.
absl::Status ValidateCase(const FuzzCase& fuzz_case);

absl::StatusOr<FuzzCase> DecodeCase(std::span<const uint8_t> bytes);
// The same into an existing case, reusing its buffers (the fuzz loop decodes without
// allocating); on error the case is unspecified.
absl::Status DecodeCaseInto(std::span<const uint8_t> bytes, FuzzCase& fuzz_case);
// InvalidArgument if the case is out of bounds (so no invalid file is ever written).
absl::StatusOr<std::vector<uint8_t>> EncodeCase(const FuzzCase& fuzz_case);
// Encodes into `out` (cleared first, capacity reused).
absl::Status EncodeCaseInto(const FuzzCase& fuzz_case, std::vector<uint8_t>& out);
// The encoded size of a valid case, without encoding it.
size_t EncodedSize(const FuzzCase& fuzz_case);

// Multi-line readable description (shape, tactic, request, policy, model, registry, payload
// summary with scale-byte classes), used by tools/repro and the findings writer.
std::string DescribeCase(const FuzzCase& fuzz_case);

}  // namespace mxdiff::fuzz
