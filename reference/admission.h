// Fold admission: which raw scale bytes make the folded transform bitwise equal to the
// ordinary one for all 16 codes. Derived by running both transforms, never typed in.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace mxdiff {

// admitted[raw] for raw 0..255; computed once from transform.h.
const std::array<bool, 256>& FoldAdmittedBytes();
inline bool FoldAdmitted(uint8_t raw) { return FoldAdmittedBytes()[raw]; }
std::string DescribeFoldAdmittedSet();  // "113..128" for a contiguous set, else a list

// The admission rule's version: its name plus a digest of the FoldAdmittedBytes table, e.g.
// "fold-bitwise-equal-all-codes/113..128/fnv1a64:...". It changes whenever the derived set does,
// so a verdict recorded under another version is stale.
const std::string& AdmissionRuleVersion();
std::string AdmissionRuleVersionOf(const std::array<bool, 256>& admitted);  // the same for any table

struct RefusedScale {
  size_t index = 0;  // position in the layer's scale array
  uint8_t raw = 0;
  bool operator==(const RefusedScale&) const = default;
};

struct LayerAdmission {
  bool admitted = true;
  size_t refused_count = 0;           // all refused bytes
  std::vector<RefusedScale> refused;  // the first max_reported of them
  std::string Describe() const;       // "refused: 3 scale bytes outside 113..128, first raw 112 at 17"
  bool operator==(const LayerAdmission&) const = default;
};

LayerAdmission AdmitLayer(std::span<const uint8_t> scale_bytes, size_t max_reported = 16);

// The scale bytes AdmitLayer has read in this process so far, all threads together: tests count
// with it that a path admits each scale byte once (fuzz_layer's, kernels/admitted_scales.h).
uint64_t AdmittedByteCount();

// Count of each raw byte value. A layer's verdict depends only on it: admitted exactly when no
// refused raw value occurs (RefusedCount == 0), whatever the order of the bytes.
using ScaleHistogram = std::array<uint64_t, 256>;
ScaleHistogram HistogramOf(std::span<const uint8_t> scale_bytes);
uint64_t RefusedCount(const ScaleHistogram& histogram);

// A verdict on one kernel layer recorded by a scale audit (`mxdiff audit --json`, schema in
// checkpoint/README.md), handed to the kernels' prepare step (GemmRunner::PrepareAudited).
struct AuditedLayerVerdict {
  std::string rule_version;  // AdmissionRuleVersion() of the audit that made it
  std::string layer;         // the layer's name, for messages
  bool admitted = false;
  int groups = 0;
  int n = 0;
  int k = 0;
  ScaleHistogram histogram{};  // of the layer's scale bytes (order-free)
};

// OK exactly when `verdict` was made under this build's rule and describes these bytes: the
// same rule version (else FailedPrecondition: stale), the same shape and the same histogram
// (else InvalidArgument: the verdict is for other bytes), and an `admitted` that the rule gives
// for that histogram (else InvalidArgument: a contradicting verdict). There is no way around it:
// the bytes are always judged by this rule.
absl::Status CheckAuditedVerdict(const AuditedLayerVerdict& verdict, int groups, int n, int k,
                                 std::span<const uint8_t> scale_bytes);

}  // namespace mxdiff
