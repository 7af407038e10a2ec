#include "fuzz/checks/known_cases.h"

#include "fuzz/mutators/case_mutator.h"
#include "kernels/builtin_kernels.h"
#include "reference/scale_class.h"

namespace mxdiff::fuzz {
namespace {

constexpr int kRows = 3, kN = 8, kK = 64;

uint16_t NormalF16(CaseRng& rng) {
  const uint64_t bits = rng();
  return uint16_t(((bits >> 8) & 0x8000) | ((8 + (bits >> 20) % 16) << 10) | ((bits >> 32) & 0x3FF));
}

}  // namespace

std::vector<FuzzCase> KnownCases() {
  std::vector<FuzzCase> cases;
  CaseRng rng(7);
  const RawRange admitted = ScaleClassRange(ScaleClass::kAdmitted);
  const int rows[] = {kRows};
  for (const CtaShape& shape : kCtaShapes) {
    for (int variant = 0; variant < 3; ++variant) {
      FuzzCase c;
      ResizeCase(c, 1, kN, kK, rows);
      c.tactic = Tactic{shape.m, shape.n, shape.k, variant == 2 ? 2 : 1, 0};
      c.request = TransformRequest::kOrdinary;
      c.model = StepModel::kSm90Emulated;
      if (variant == 0) {
        const uint16_t values[4] = {0x7400, 0x1500, 0xF400, 0x3C00};
        for (int r = 0; r < kRows; ++r) {
          for (int i = 0; i < 4; ++i) c.activations[size_t(r) * kK + size_t(i)] = values[i];
        }
        for (uint8_t& byte : c.packed_codes) byte = 0x22;  // two codes of 1.0
        for (uint8_t& raw : c.scale_bytes) raw = 127;      // 2^0
      } else {
        for (uint16_t& value : c.activations) value = NormalF16(rng);
        for (uint8_t& byte : c.packed_codes) byte = uint8_t(rng());
        for (uint8_t& raw : c.scale_bytes) raw = uint8_t(admitted.first + rng() % (admitted.last - admitted.first + 1));
      }
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

}  // namespace mxdiff::fuzz
