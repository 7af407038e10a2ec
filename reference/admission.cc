#include "reference/admission.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <string_view>
#include <utility>

#include "fmt/core.h"
#include "reference/bulk_loop.h"
#include "reference/hash.h"
#include "reference/transform.h"

namespace mxdiff {
namespace {

std::array<bool, 256> DeriveAdmittedBytes() {
  std::array<bool, 256> admitted{};
  for (int raw = 0; raw < 256; ++raw) {
    bool equal_for_all_codes = true;
    const uint16_t ordinary_scale = prepared_scale(Transform::kOrdinary, uint8_t(raw));
    const uint16_t folded_scale = prepared_scale(Transform::kFolded, uint8_t(raw));
    for (uint8_t code = 0; code < 16; ++code) {
      equal_for_all_codes &= dequantize(Transform::kOrdinary, code, ordinary_scale) ==
                             dequantize(Transform::kFolded, code, folded_scale);
    }
    admitted[raw] = equal_for_all_codes;
  }
  return admitted;
}

// "113..128" for a contiguous set, else the list.
std::string DescribeAdmittedSet(const std::array<bool, 256>& admitted) {
  std::string ranges;
  for (int raw = 0; raw < 256;) {
    if (!admitted[raw]) {
      ++raw;
      continue;
    }
    int last = raw;
    while (last + 1 < 256 && admitted[last + 1]) ++last;
    ranges += fmt::format("{}{}", ranges.empty() ? "" : ",", raw == last ? fmt::format("{}", raw)
                                                                           : fmt::format("{}..{}", raw, last));
    raw = last + 1;
  }
  return ranges.empty() ? "none" : ranges;
}

}  // namespace

std::string DescribeFoldAdmittedSet() { return DescribeAdmittedSet(FoldAdmittedBytes()); }

const std::array<bool, 256>& FoldAdmittedBytes() {
  static const std::array<bool, 256> admitted = DeriveAdmittedBytes();
  return admitted;
}

std::string AdmissionRuleVersionOf(const std::array<bool, 256>& admitted) {
  // FNV-1a over the rule's name and the 256 table entries: any change of the derived set (or a
  // rename of the rule) gives another version.
  constexpr std::string_view kRuleName = "fold-bitwise-equal-all-codes";
  uint64_t digest = kFnv1a64Basis;
  for (char c : kRuleName) digest = Fnv1a64Mix(digest, uint8_t(c));
  for (bool entry : admitted) digest = Fnv1a64Mix(digest, entry ? 1 : 0);
  return fmt::format("{}/{}/fnv1a64:{:016x}", kRuleName, DescribeAdmittedSet(admitted), digest);
}

const std::string& AdmissionRuleVersion() {
  static const std::string version = AdmissionRuleVersionOf(FoldAdmittedBytes());
  return version;
}

std::string LayerAdmission::Describe() const {
  if (admitted) return "admitted";
  std::string text = fmt::format("refused: {} scale byte{} outside the admitted set {}", refused_count,
                                 refused_count == 1 ? "" : "s", DescribeFoldAdmittedSet());
  if (!refused.empty()) {
    text += fmt::format(", first raw {} at index {}", refused.front().raw, refused.front().index);
  }
  return text;
}

namespace {

// The per-byte loops of admission (reference/bulk_loop.h).
MXDIFF_BULK_LOOP size_t CountRefused(const bool* admitted, const uint8_t* bytes, size_t count) {
  size_t refused = 0;
  for (size_t i = 0; i < count; ++i) refused += admitted[bytes[i]] ? 0 : 1;
  return refused;
}

// The same where the admitted bytes are first..first + width: a subtraction and a compare per byte,
// which the compiler turns into vector code (no table lookup), counted in blocks small enough for
// 16-bit lanes.
MXDIFF_BULK_LOOP size_t CountOutside(const uint8_t* bytes, size_t count, uint8_t first, uint8_t width) {
  constexpr size_t kBlock = 65535;
  size_t refused = 0;
  for (size_t begin = 0; begin < count; begin += kBlock) {
    const size_t end = count - begin < kBlock ? count : begin + kBlock;
    uint16_t block = 0;
    for (size_t i = begin; i < end; ++i) block += uint8_t(bytes[i] - first) > width ? 1 : 0;
    refused += block;
  }
  return refused;
}

// The admitted bytes as one range (first, width), or nullopt where they are not contiguous.
std::optional<std::pair<uint8_t, uint8_t>> AdmittedRange(const std::array<bool, 256>& admitted) {
  const auto first = std::find(admitted.begin(), admitted.end(), true);
  if (first == admitted.end()) return std::nullopt;
  const auto last = std::find(first, admitted.end(), false);
  if (std::find(last, admitted.end(), true) != admitted.end()) return std::nullopt;
  return std::pair<uint8_t, uint8_t>(uint8_t(first - admitted.begin()), uint8_t(last - first - 1));
}

// The index of the first refused byte at or after `from`, or `count`.
MXDIFF_BULK_LOOP size_t NextRefused(const bool* admitted, const uint8_t* bytes, size_t from, size_t count) {
  while (from < count && admitted[bytes[from]]) ++from;
  return from;
}

MXDIFF_BULK_LOOP void Count(const uint8_t* bytes, size_t count, uint64_t* histogram) {
  for (size_t i = 0; i < count; ++i) ++histogram[bytes[i]];
}

std::atomic<uint64_t> admitted_bytes{0};

}  // namespace

uint64_t AdmittedByteCount() { return admitted_bytes.load(std::memory_order_relaxed); }

LayerAdmission AdmitLayer(std::span<const uint8_t> scale_bytes, size_t max_reported) {
  admitted_bytes.fetch_add(scale_bytes.size(), std::memory_order_relaxed);
  const std::array<bool, 256>& admitted = FoldAdmittedBytes();
  static const std::optional<std::pair<uint8_t, uint8_t>> range = AdmittedRange(admitted);
  LayerAdmission verdict;
  verdict.refused_count = range ? CountOutside(scale_bytes.data(), scale_bytes.size(), range->first, range->second)
                                : CountRefused(admitted.data(), scale_bytes.data(), scale_bytes.size());
  verdict.admitted = verdict.refused_count == 0;
  const size_t reported = std::min(max_reported, verdict.refused_count);
  for (size_t index = 0; verdict.refused.size() < reported; ++index) {
    index = NextRefused(admitted.data(), scale_bytes.data(), index, scale_bytes.size());
    verdict.refused.push_back({index, scale_bytes[index]});
  }
  return verdict;
}

ScaleHistogram HistogramOf(std::span<const uint8_t> scale_bytes) {
  ScaleHistogram histogram{};
  Count(scale_bytes.data(), scale_bytes.size(), histogram.data());
  return histogram;
}

uint64_t RefusedCount(const ScaleHistogram& histogram) {
  const std::array<bool, 256>& admitted = FoldAdmittedBytes();
  uint64_t refused = 0;
  for (int raw = 0; raw < 256; ++raw) refused += admitted[raw] ? 0 : histogram[raw];
  return refused;
}

absl::Status CheckAuditedVerdict(const AuditedLayerVerdict& verdict, int groups, int n, int k,
                                 std::span<const uint8_t> scale_bytes) {
  const std::string& rule = AdmissionRuleVersion();
  if (verdict.rule_version != rule) {
    return absl::FailedPreconditionError(
        fmt::format("audit verdict for layer '{}' is stale: made under admission rule '{}', this build's rule is "
                    "'{}'; audit the checkpoint again",
                    verdict.layer, verdict.rule_version, rule));
  }
  if (verdict.groups != groups || verdict.n != n || verdict.k != k) {
    return absl::InvalidArgumentError(
        fmt::format("audit verdict for layer '{}' is for groups {} x N {} x K {}, the layer being prepared is "
                    "{} x {} x {}",
                    verdict.layer, verdict.groups, verdict.n, verdict.k, groups, n, k));
  }
  const ScaleHistogram histogram = HistogramOf(scale_bytes);
  if (histogram != verdict.histogram) {
    int raw = 0;
    while (histogram[raw] == verdict.histogram[raw]) ++raw;
    return absl::InvalidArgumentError(
        fmt::format("audit verdict for layer '{}' does not describe these scale bytes: it counts {} bytes of raw "
                    "{}, the layer has {}",
                    verdict.layer, verdict.histogram[raw], raw, histogram[raw]));
  }
  const uint64_t refused = RefusedCount(histogram);
  if (verdict.admitted != (refused == 0)) {
    return absl::InvalidArgumentError(
        fmt::format("audit verdict for layer '{}' contradicts the admission rule: it says {}, the rule gives {} "
                    "({} scale bytes outside {})",
                    verdict.layer, verdict.admitted ? "admitted" : "refused", refused == 0 ? "admitted" : "refused",
                    refused, DescribeFoldAdmittedSet()));
  }
  return absl::OkStatus();
}

}  // namespace mxdiff
