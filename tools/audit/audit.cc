#include "tools/audit/audit.h"

#include <algorithm>

#include "fmt/core.h"

namespace mxdiff::audit {

AuditResult AuditCheckpoint(Checkpoint checkpoint, const ByteSource& source, const AuditOptions& options) {
  AuditResult result;
  result.max_positions = options.scan.max_positions;
  result.checkpoint = std::move(checkpoint);
  result.errors = result.checkpoint.errors;
  if (!result.errors.empty() && !options.keep_going) return result;
  absl::StatusOr<AuditPlan> plan = PlanAudit(result.checkpoint, options.selection);
  if (!plan.ok()) {
    result.errors.push_back({"", "", std::string(plan.status().message())});
    return result;
  }
  result.plan = *std::move(plan);
  result.errors.insert(result.errors.end(), result.plan.errors.begin(), result.plan.errors.end());
  if (!result.errors.empty() && !options.keep_going) return result;
  result.scan = ScanScales(result.checkpoint, result.plan, source, options.scan);
  result.errors.insert(result.errors.end(), result.scan.errors.begin(), result.scan.errors.end());
  return result;
}

AuditResult RunAudit(const std::vector<std::string>& paths, const AuditOptions& options) {
  Checkpoint checkpoint = LoadCheckpoint(paths, options.keep_going);
  std::vector<std::string> files;
  for (const CheckpointFile& file : checkpoint.files) files.push_back(file.path);
  const MappedFiles source(std::move(files));
  return AuditCheckpoint(std::move(checkpoint), source, options);
}

LayerVerdict JudgeLayer(const AuditResult& result, const KernelLayer& layer) {
  LayerVerdict verdict;
  verdict.problems = layer.problems;
  for (size_t s : layer.members) {
    const ScaleTensor& scale = result.plan.scales[s];
    const TensorScan* scan = s < result.scan.tensors.size() ? &result.scan.tensors[s] : nullptr;
    if (scan == nullptr || !scan->scanned) {
      verdict.problems.push_back({scale.name, "its bytes could not be read (see the errors)"});
      continue;
    }
    for (const auto& [raw, count] : scan->histogram) verdict.histogram[raw] += count;
    verdict.refused_bytes += scan->refused;
    for (const RefusedScale& refused : scan->first_refused) {
      if (verdict.first_refused.size() >= result.max_positions) break;
      verdict.first_refused.push_back({s, refused.index, scale.layer_offset + refused.index, refused.raw});
    }
  }
  verdict.admitted = verdict.problems.empty() && RefusedCount(verdict.histogram) == 0;
  return verdict;
}

int ExitStatus(const AuditResult& result) {
  if (!result.errors.empty()) return 2;
  for (const KernelLayer& layer : result.plan.layers) {
    if (!JudgeLayer(result, layer).admitted) return 1;
  }
  return 0;
}

const std::array<uint8_t, 256>& OrdinaryDeviations() {
  static const std::array<uint8_t, 256> deviations = [] {
    std::array<uint8_t, 256> table{};
    for (int raw = 0; raw < 256; ++raw) {
      for (uint8_t code = 0; code < 16; ++code) {
        table[raw] |= uint8_t(1u << int(ClassifyAgainstSpec(Transform::kOrdinary, code, uint8_t(raw))));
      }
      table[raw] &= uint8_t(~(1u << int(SpecDeviation::kNone)));
    }
    return table;
  }();
  return deviations;
}

std::vector<uint64_t> Coordinates(uint64_t index, std::span<const uint64_t> shape) {
  std::vector<uint64_t> coordinates(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    const uint64_t extent = std::max<uint64_t>(shape[d], 1);
    coordinates[d] = index % extent;
    index /= extent;
  }
  return coordinates;
}

}  // namespace mxdiff::audit
