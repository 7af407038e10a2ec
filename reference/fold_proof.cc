#include "reference/fold_proof.h"

#include "fmt/format.h"
#include "reference/transform.h"

namespace mxdiff {
namespace {

std::string BytesText(const std::vector<uint8_t>& bytes) {
  if (bytes.empty()) return "no byte";
  if (int(bytes.back()) - int(bytes.front()) + 1 == int(bytes.size())) {
    return bytes.size() == 1 ? fmt::format("raw {}", bytes[0]) : fmt::format("raw {}..{}", bytes.front(), bytes.back());
  }
  return fmt::format("raw {}", fmt::join(bytes, ","));
}

}  // namespace

FoldProof ProveFoldOver(const ScaleHistogram& observed) {
  FoldProof proof;
  for (int raw = 0; raw < 256; ++raw) {
    if (observed[raw] == 0) continue;
    proof.observed.push_back(uint8_t(raw));
    const uint16_t ordinary_scale = prepared_scale(Transform::kOrdinary, uint8_t(raw));
    const uint16_t folded_scale = prepared_scale(Transform::kFolded, uint8_t(raw));
    for (uint8_t code = 0; code < 16; ++code) {
      const FoldPattern pattern{uint8_t(raw), code, dequantize(Transform::kOrdinary, code, ordinary_scale),
                                dequantize(Transform::kFolded, code, folded_scale)};
      ++proof.patterns;
      if (pattern.ordinary == pattern.folded) {
        ++proof.equal;
      } else {
        proof.differing.push_back(pattern);
      }
    }
  }
  return proof;
}

std::string FoldProof::Describe() const {
  std::string text = fmt::format("{}: {} byte{} x 16 codes = {} patterns, {} equal", BytesText(observed),
                                 observed.size(), observed.size() == 1 ? "" : "s", patterns, equal);
  if (!differing.empty()) {
    const FoldPattern& first = differing.front();
    text += fmt::format("; first difference raw {} code 0x{:X}: ordinary 0x{:04x}, folded 0x{:04x}", first.raw,
                        first.code, first.ordinary, first.folded);
  }
  return text;
}

}  // namespace mxdiff
