#include "reference/admission.h"

#include "fmt/core.h"
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
std::string DescribeAdmittedSet() {
  const std::array<bool, 256>& admitted = FoldAdmittedBytes();
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

const std::array<bool, 256>& FoldAdmittedBytes() {
  static const std::array<bool, 256> admitted = DeriveAdmittedBytes();
  return admitted;
}

std::string LayerAdmission::Describe() const {
  if (admitted) return "admitted";
  std::string text = fmt::format("refused: {} scale byte{} outside the admitted set {}", refused_count,
                                 refused_count == 1 ? "" : "s", DescribeAdmittedSet());
  if (!refused.empty()) {
    text += fmt::format(", first raw {} at index {}", refused.front().raw, refused.front().index);
  }
  return text;
}

LayerAdmission AdmitLayer(std::span<const uint8_t> scale_bytes, size_t max_reported) {
  const std::array<bool, 256>& admitted = FoldAdmittedBytes();
  LayerAdmission verdict;
  for (size_t index = 0; index < scale_bytes.size(); ++index) {
    if (admitted[scale_bytes[index]]) continue;
    verdict.admitted = false;
    ++verdict.refused_count;
    if (verdict.refused.size() < max_reported) verdict.refused.push_back({index, scale_bytes[index]});
  }
  return verdict;
}

}  // namespace mxdiff
