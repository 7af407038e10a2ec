#include "checkpoint/layer_verdicts.h"

#include <climits>

#include "checkpoint/audit.h"
#include "checkpoint/json_bytes.h"
#include "checkpoint/strict_json.h"
#include "fmt/core.h"

namespace mxdiff::checkpoint {
namespace {

using nlohmann::json;

absl::Status Malformed(std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("audit report: {}", what));
}

absl::StatusOr<int> OptionalInt(const json& layer, const char* key) {
  const auto it = layer.find(key);
  if (it == layer.end() || it->is_null()) return 0;
  if (!it->is_number_unsigned() || it->get<uint64_t>() > uint64_t(INT_MAX)) {
    return Malformed(fmt::format("layer field '{}' is not a non-negative int", key));
  }
  return int(it->get<uint64_t>());
}

}  // namespace

absl::StatusOr<std::vector<AuditedLayerVerdict>> ReadLayerVerdicts(std::string_view json_report) {
  // A report naming a path or quoting bytes that are not UTF-8 escapes them (json_bytes.h).
  absl::StatusOr<json> report = ParseStrictJson("audit report", cli::ByteEscapesReplaced(json_report), 16, -1);
  if (!report.ok()) return report.status();
  if (!report->is_object() || report->value("schema", "") != kAuditReportSchema) {
    return Malformed(fmt::format("not an mxdiff audit report (schema {})", kAuditReportSchema));
  }
  const json* rule = report->contains("admission_rule") ? &(*report)["admission_rule"] : nullptr;
  if (rule == nullptr || !rule->is_object() || !rule->contains("version") || !(*rule)["version"].is_string()) {
    return Malformed("no admission_rule.version");
  }
  if (const auto partial = report->find("partial"); partial != report->end() && *partial == true) {
    return Malformed("the report is partial (the audit stopped at an error): it holds no verdict");
  }
  const auto layers = report->find("layers");
  if (layers == report->end() || !layers->is_array()) return Malformed("no layers array");
  std::vector<AuditedLayerVerdict> verdicts;
  for (const json& layer : *layers) {
    if (!layer.is_object() || !layer.contains("name") || !layer["name"].is_string() || !layer.contains("admitted") ||
        !layer["admitted"].is_boolean() || !layer.contains("histogram") || !layer["histogram"].is_object()) {
      return Malformed("a layer without name, admitted or histogram");
    }
    AuditedLayerVerdict verdict;
    verdict.rule_version = (*rule)["version"].get<std::string>();
    verdict.layer = layer["name"].get<std::string>();
    verdict.admitted = layer["admitted"].get<bool>();
    for (auto [field, key] : {std::pair{&verdict.groups, "groups"}, std::pair{&verdict.n, "n"}, std::pair{&verdict.k, "k"}}) {
      absl::StatusOr<int> value = OptionalInt(layer, key);
      if (!value.ok()) return value.status();
      *field = *value;
    }
    for (const auto& [raw, count] : layer["histogram"].items()) {
      size_t used = 0;
      int value = -1;
      try {
        value = std::stoi(raw, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != raw.size() || value < 0 || value > 255 || !count.is_number_unsigned()) {
        return Malformed(fmt::format("layer {}: histogram entry {} is not raw 0..255 with a count", Quoted(verdict.layer),
                                     Quoted(raw)));
      }
      verdict.histogram[size_t(value)] = count.get<uint64_t>();
    }
    verdicts.push_back(std::move(verdict));
  }
  return verdicts;
}

absl::StatusOr<AuditedLayerVerdict> ReadLayerVerdict(std::string_view json_report, std::string_view layer) {
  absl::StatusOr<std::vector<AuditedLayerVerdict>> verdicts = ReadLayerVerdicts(json_report);
  if (!verdicts.ok()) return verdicts.status();
  for (AuditedLayerVerdict& verdict : *verdicts) {
    if (verdict.layer == layer) return std::move(verdict);
  }
  return absl::NotFoundError(fmt::format("audit report: no layer {}", Quoted(layer)));
}

absl::StatusOr<std::vector<uint8_t>> ReadLayerScaleBytes(const Checkpoint& checkpoint, const AuditPlan& plan,
                                                         const KernelLayer& layer, const ByteSource& source) {
  std::vector<uint8_t> bytes;
  bytes.reserve(size_t(layer.scale_bytes));
  for (size_t s : layer.members) {
    const ScaleTensor& scale = plan.scales[s];
    const TensorInfo& tensor = checkpoint.tensor(scale.ref);
    absl::StatusOr<ByteWindow> window =
        source.Window(scale.ref.file, checkpoint.files[scale.ref.file].header.data_start + tensor.begin, tensor.byte_size());
    if (!window.ok()) return window.status();
    bytes.insert(bytes.end(), window->bytes().begin(), window->bytes().end());
  }
  return bytes;
}

}  // namespace mxdiff::checkpoint
