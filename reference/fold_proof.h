// The transform proof over the scale bytes a checkpoint holds (the seed's "208/208 FP16 bit
// patterns equal"): for every raw byte observed and every signed E2M1 code, the ordinary and the
// folded transform's fp16 bits, compared. Where it holds, folding changes no weight of any layer
// whose bytes are all observed ones; the audit decides layer by layer, this says why.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reference/admission.h"

namespace mxdiff {

struct FoldPattern {
  uint8_t raw = 0;
  uint8_t code = 0;
  uint16_t ordinary = 0;  // fp16 bits of the ordinary transform's weight
  uint16_t folded = 0;
};

struct FoldProof {
  std::vector<uint8_t> observed;   // raw bytes with a count, ascending
  int patterns = 0;                // observed x 16 codes
  int equal = 0;                   // patterns whose two weights have the same bits
  std::vector<FoldPattern> differing;  // every pattern that differs
  bool Holds() const { return patterns > 0 && equal == patterns; }
  // "raw 114..126: 13 bytes x 16 codes = 208 patterns, 208 equal"; a differing one is named.
  std::string Describe() const;
};

FoldProof ProveFoldOver(const ScaleHistogram& observed);

}  // namespace mxdiff
