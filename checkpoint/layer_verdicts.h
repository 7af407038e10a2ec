// Between an audit and the kernels' prepare step: a layer's verdict read back from the audit's
// JSON report, and a layer's scale bytes gathered from the checkpoint in the kernels' order
// (groups x N x K/32), so that GemmRunner::PrepareAudited can check one against the other.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "reference/admission.h"
#include "checkpoint/byte_source.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/scale_plan.h"

namespace mxdiff::checkpoint {

// Every kernel layer of `mxdiff audit --json` output, as AuditedLayerVerdicts. A layer the
// report gives no shape (a structural problem) keeps groups = n = k = 0; a refused one keeps
// admitted = false, so neither can pass CheckAuditedVerdict as admitted.
absl::StatusOr<std::vector<AuditedLayerVerdict>> ReadLayerVerdicts(std::string_view json_report);
absl::StatusOr<AuditedLayerVerdict> ReadLayerVerdict(std::string_view json_report, std::string_view layer);

// The layer's scale bytes in kernel order (its members' bytes one after the other).
absl::StatusOr<std::vector<uint8_t>> ReadLayerScaleBytes(const Checkpoint& checkpoint, const AuditPlan& plan,
                                                         const KernelLayer& layer, const ByteSource& source);

}  // namespace mxdiff::checkpoint
