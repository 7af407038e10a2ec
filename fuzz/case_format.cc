#include "fuzz/case_format.h"

#include <bit>
#include <cstring>
#include <map>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "reference/split_plan.h"

namespace mxdiff::fuzz {
namespace {

// Encoding and decoding walk the same field list (VisitCase) with one of these two cursors,
// so the two directions cannot drift apart. Integers are little-endian.
class ByteReader {
 public:
  explicit ByteReader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  static constexpr bool kDecoding = true;

  absl::Status Int(const char* prefix, const char* field, int width, int minimum, int maximum, int& value) {
    if (bytes_.size() - offset_ < size_t(width)) {
      return absl::InvalidArgumentError(
          fmt::format("case truncated at byte {} while reading {}{}", offset_, prefix, field));
    }
    uint32_t raw = 0;
    for (int i = 0; i < width; ++i) raw |= uint32_t(bytes_[offset_ + i]) << (8 * i);
    if (int64_t(raw) < minimum || int64_t(raw) > maximum) {
      return absl::InvalidArgumentError(
          fmt::format("{}{} = {} at byte {} is outside {}..{}", prefix, field, raw, offset_, minimum, maximum));
    }
    offset_ += width;
    value = int(raw);
    return absl::OkStatus();
  }
  template <typename T>
  absl::Status Array(const char* field, std::vector<T>& values, size_t count) {
    const size_t size = count * sizeof(T);
    if (bytes_.size() - offset_ < size) {
      return absl::InvalidArgumentError(fmt::format("case truncated in {}: {} bytes needed at byte {}, {} left",
                                                    field, size, offset_, bytes_.size() - offset_));
    }
    values.resize(count);
    if (count != 0) std::memcpy(values.data(), bytes_.data() + offset_, size);  // little-endian host
    offset_ += size;
    return absl::OkStatus();
  }
  size_t offset() const { return offset_; }
  size_t size() const { return bytes_.size(); }

 private:
  std::span<const uint8_t> bytes_;
  size_t offset_ = 0;
};

class ByteWriter {
 public:
  static constexpr bool kDecoding = false;
  explicit ByteWriter(std::vector<uint8_t>& out) : out_(out) {}

  absl::Status Int(const char* prefix, const char* field, int width, int minimum, int maximum, int& value) {
    if (value < minimum || value > maximum) {
      return absl::InvalidArgumentError(
          fmt::format("{}{} = {} is outside {}..{}", prefix, field, value, minimum, maximum));
    }
    for (int i = 0; i < width; ++i) out_.push_back(uint8_t(uint32_t(value) >> (8 * i)));
    return absl::OkStatus();
  }
  template <typename T>
  absl::Status Array(const char* field, std::vector<T>& values, size_t count) {
    if (values.size() != count) {
      return absl::InvalidArgumentError(
          fmt::format("{} has {} elements, the shape needs {}", field, values.size(), count));
    }
    const size_t offset = out_.size();
    out_.resize(offset + count * sizeof(T));
    if (count != 0) std::memcpy(out_.data() + offset, values.data(), count * sizeof(T));  // little-endian host
    return absl::OkStatus();
  }

 private:
  std::vector<uint8_t>& out_;
};

#define MXDIFF_RETURN_IF_ERROR(expr)        \
  do {                                      \
    absl::Status status_ = (expr);          \
    if (!status_.ok()) return status_;      \
  } while (false)

template <typename Cursor>
absl::Status VisitTactic(Cursor& io, const char* prefix, Tactic& tactic) {
  MXDIFF_RETURN_IF_ERROR(io.Int(prefix, ".cta_m", 2, 1, kMaxTileSize, tactic.cta_m));
  MXDIFF_RETURN_IF_ERROR(io.Int(prefix, ".cta_n", 2, 1, kMaxTileSize, tactic.cta_n));
  MXDIFF_RETURN_IF_ERROR(io.Int(prefix, ".cta_k", 2, 4, kMaxTileSize, tactic.cta_k));
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

// The one field list of format version 1 (fuzz/README.md mirrors it).
template <typename Cursor>
absl::Status VisitCase(Cursor& io, FuzzCase& c) {
  int magic[4] = {kCaseMagic[0], kCaseMagic[1], kCaseMagic[2], kCaseMagic[3]};
  for (int i = 0; i < 4; ++i) {
    MXDIFF_RETURN_IF_ERROR(io.Int("", "magic", 1, kCaseMagic[i], kCaseMagic[i], magic[i]));
  }
  int version = kCaseVersion;
  MXDIFF_RETURN_IF_ERROR(io.Int("", "version", 1, kCaseVersion, kCaseVersion, version));
  MXDIFF_RETURN_IF_ERROR(io.Int("", "groups", 1, 1, kMaxGroups, c.groups));
  MXDIFF_RETURN_IF_ERROR(io.Int("", "n", 2, 1, kMaxN, c.n));
  MXDIFF_RETURN_IF_ERROR(io.Int("", "k", 2, kBlockK, kMaxK, c.k));
  if (c.k % kBlockK != 0) {
    return absl::InvalidArgumentError(fmt::format("k = {} is not a multiple of {}", c.k, kBlockK));
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
    MXDIFF_RETURN_IF_ERROR(io.Int("", "rows", 1, 0, kMaxRowsPerGroup, rows));
    if constexpr (Cursor::kDecoding) c.row_offsets[g + 1] = c.row_offsets[g] + rows;
  }
  static_assert(std::endian::native == std::endian::little, "the payload is copied as little-endian");
  const size_t groups = size_t(c.groups), n = size_t(c.n), k = size_t(c.k);
  MXDIFF_RETURN_IF_ERROR(io.Array("activations", c.activations, size_t(c.rows()) * k));
  MXDIFF_RETURN_IF_ERROR(io.Array("packed_codes", c.packed_codes, groups * n * k / 2));
  return io.Array("scale_bytes", c.scale_bytes, groups * n * k / kBlockK);
}

std::string ScaleClassSummary(std::span<const uint8_t> scales) {
  // Classes of FACTS.md §3-4: flushed (a = 0), admitted (a = 1..16), folded-Inf (a = 17),
  // folded sign spill (a >= 18, NaN byte included).
  size_t flushed = 0, admitted = 0, infinite = 0, spill = 0;
  std::map<int, size_t> histogram;
  for (uint8_t raw : scales) {
    const int a = adjusted_exponent(raw);
    if (a == 0) ++flushed;
    else if (a <= 16) ++admitted;
    else if (a == 17) ++infinite;
    else ++spill;
    ++histogram[raw];
  }
  std::string text = fmt::format("a=0: {}, a=1..16: {}, a=17: {}, a>=18: {}; raw bytes:", flushed, admitted,
                                 infinite, spill);
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

absl::Status ValidateCase(const FuzzCase& fuzz_case) {
  std::vector<uint8_t> scratch;
  scratch.reserve(EncodedSize(fuzz_case));
  ByteWriter writer(scratch);
  // VisitCase takes a mutable case for the decoder's sake; the writer never changes it.
  return VisitCase(writer, const_cast<FuzzCase&>(fuzz_case));
}

absl::Status DecodeCaseInto(std::span<const uint8_t> bytes, FuzzCase& fuzz_case) {
  ByteReader reader(bytes);
  MXDIFF_RETURN_IF_ERROR(VisitCase(reader, fuzz_case));
  if (reader.offset() != reader.size()) {
    return absl::InvalidArgumentError(fmt::format("{} trailing bytes after the case (expected {} bytes in all)",
                                                  reader.size() - reader.offset(), reader.offset()));
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

size_t EncodedSize(const FuzzCase& c) {
  constexpr size_t kHeader = 4 + 1 + 1 + 2 + 2 + 3 + 9 + 1;
  return kHeader + c.registry.size() * 10 + size_t(c.groups) + c.activations.size() * 2 + c.packed_codes.size() +
         c.scale_bytes.size();
}

std::string DescribeCase(const FuzzCase& c) {
  std::string text = fmt::format("case v{}: groups {}, rows", kCaseVersion, c.groups);
  for (int g = 0; g < c.groups; ++g) text += fmt::format(" {}", c.row_offsets[g + 1] - c.row_offsets[g]);
  text += fmt::format(" (M = {}), N = {}, K = {}\n", c.rows(), c.n, c.k);
  text += fmt::format("  tactic {} ({} effective splits), request {}, policy {}, model {}\n",
                      TacticName(c.tactic), effective_splits(c.k, c.tactic.cta_k, c.tactic.splits),
                      TransformRequestName(c.request), FallbackPolicyName(c.policy), StepModelName(c.model));
  text += fmt::format("  registry ({} entries):", c.registry.size());
  for (const RegistryEntry& entry : c.registry) {
    text += fmt::format(" {}:{}", TacticName(entry.tactic), TransformName(entry.transform));
  }
  text += fmt::format("\n  scales ({}): {}\n", c.scale_bytes.size(), ScaleClassSummary(c.scale_bytes));
  size_t specials = 0;
  for (uint16_t a : c.activations) specials += (a & 0x7C00) == 0x7C00 || (a & 0x7C00) == 0 ? 1 : 0;
  text += fmt::format("  activations: {} values, {} zero/subnormal/Inf/NaN\n", c.activations.size(), specials);
  return text;
}

}  // namespace mxdiff::fuzz
