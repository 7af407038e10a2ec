#include "checkpoint/audit.h"

#include <algorithm>
#include <map>
#include <string_view>

#include "fmt/core.h"
#include "checkpoint/strict_json.h"
#include "reference/exit_status.h"

namespace mxdiff::checkpoint {

AuditResult AuditCheckpoint(Checkpoint checkpoint, const ByteSource& source, const AuditOptions& options) {
  AuditResult result;
  result.max_positions = options.scan.max_positions;
  result.pattern = options.selection.pattern;
  result.checkpoint = std::move(checkpoint);
  result.errors = result.checkpoint.errors;
  result.stopped = !result.errors.empty() && !options.keep_going;
  if (result.stopped) return result;
  absl::StatusOr<AuditPlan> plan = PlanAudit(result.checkpoint, options.selection);
  if (!plan.ok()) {
    result.errors.push_back({"", "", std::string(plan.status().message())});
    result.stopped = true;
    return result;
  }
  result.plan = *std::move(plan);
  result.errors.insert(result.errors.end(), result.plan.errors.begin(), result.plan.errors.end());
  result.stopped = !result.errors.empty() && !options.keep_going;
  if (result.stopped) return result;
  result.scan = ScanScales(result.checkpoint, result.plan, source, options.scan);
  result.errors.insert(result.errors.end(), result.scan.errors.begin(), result.scan.errors.end());
  return result;
}

AuditResult RunAudit(const std::vector<std::string>& paths, const AuditOptions& options) {
  Checkpoint checkpoint = LoadCheckpoint(paths, options.keep_going);
  std::vector<std::string> files;
  for (const CheckpointFile& file : checkpoint.files) files.push_back(file.path);
  const MappedFiles source(std::move(files));
  AuditResult result = AuditCheckpoint(std::move(checkpoint), source, options);
  if (result.stopped) return result;
  for (const UnindexedFile& file : result.checkpoint.unindexed) {
    UnindexedAudit audit;
    audit.file = file;
    const std::string beside = fmt::format("a file beside the index {} that it does not name", file.index);
    if (!file.error.empty()) {
      result.errors.push_back({file.file, "", fmt::format("{} ({})", file.error, beside)});
      result.unindexed.push_back(std::move(audit));
      continue;
    }
    AuditOptions own_options = options;
    own_options.keep_going = true;  // all of it, whatever the main audit's flag: it is reported apart
    own_options.scan.progress = nullptr;
    const AuditResult own = RunAudit({file.file}, own_options);
    audit.audited = true;
    audit.layers = own.plan.layers.size();
    for (const KernelLayer& layer : own.plan.layers) {
      if (!JudgeLayer(own, layer).admitted) audit.refused.push_back(layer.name);
    }
    audit.no_kernel_layer = FindNoKernelLayer(own).has_value();
    for (const TensorScan& scan : own.scan.tensors) audit.refused_bytes += scan.refused;
    for (const AuditError& error : own.errors) {
      result.errors.push_back({error.file, error.tensor, fmt::format("{} ({})", error.message, beside)});
    }
    result.unindexed.push_back(std::move(audit));
  }
  return result;
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

namespace {

constexpr size_t kListedCounts = 6;  // dtypes and name endings named in the message; the rest counted

std::vector<std::pair<std::string, uint64_t>> ByCount(const std::map<std::string, uint64_t>& counts) {
  std::vector<std::pair<std::string, uint64_t>> sorted(counts.begin(), counts.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return sorted;
}

// "U8 8, BF16 4"; `quote` for names from the input.
std::string ListCounts(const std::vector<std::pair<std::string, uint64_t>>& counts, bool quote) {
  std::string text;
  for (size_t i = 0; i < counts.size() && i < kListedCounts; ++i) {
    text += fmt::format("{}{} {}", i ? ", " : "", quote ? Quoted(counts[i].first, 40) : counts[i].first,
                        counts[i].second);
  }
  if (counts.size() > kListedCounts) text += fmt::format(", {} more", counts.size() - kListedCounts);
  return text;
}

// "layers.0.mlp.weight_scale" -> ".weight_scale"; a name without a dot is its own ending.
std::string NameEnding(std::string_view name) {
  const size_t dot = name.rfind('.');
  return std::string(dot == std::string_view::npos ? name : name.substr(dot));
}

}  // namespace

std::optional<NoKernelLayer> FindNoKernelLayer(const AuditResult& result) {
  if (result.stopped || !result.plan.layers.empty()) return std::nullopt;
  NoKernelLayer found;
  std::map<std::string, uint64_t> dtypes, endings;
  for (const CheckpointFile& file : result.checkpoint.files) {
    for (const TensorInfo& tensor : file.header.tensors) {
      ++found.tensors;
      ++dtypes[std::string(DtypeName(tensor.dtype))];
      ++endings[NameEnding(tensor.name)];
    }
  }
  found.dtypes = ByCount(dtypes);
  found.name_endings = ByCount(endings);
  found.scale_tensors = result.plan.scales.size();
  std::string scales;
  if (found.scale_tensors > 0) {
    std::map<std::string, uint64_t> reasons;
    for (const ScaleTensor& scale : result.plan.scales) ++reasons[scale.note_kind];
    scales = fmt::format("{} scale tensor{} selected, in no kernel layer ({})", found.scale_tensors,
                         found.scale_tensors == 1 ? "" : "s", ListCounts(ByCount(reasons), false));
  } else if (result.pattern) {
    scales = fmt::format("no tensor matches --pattern {}", Quoted(*result.pattern));
  } else {
    scales = "no scale tensor by the known conventions (F8_E8M0 tensors; U8 X.scale beside X.weight, X_scales beside "
             "X_blocks; --pattern chooses others)";
  }
  found.message = fmt::format("no MXFP4 kernel layer found in {} file{}, {} tensor{} (dtypes {}; names ending {}): {}",
                              result.checkpoint.files.size(), result.checkpoint.files.size() == 1 ? "" : "s",
                              found.tensors, found.tensors == 1 ? "" : "s",
                              found.dtypes.empty() ? std::string("none") : ListCounts(found.dtypes, false),
                              found.name_endings.empty() ? std::string("none") : ListCounts(found.name_endings, true), scales);
  return found;
}

int ExitStatus(const AuditResult& result) {
  if (!result.errors.empty()) return kExitBadInput;
  if (FindNoKernelLayer(result)) return kExitBadInput;
  for (const KernelLayer& layer : result.plan.layers) {
    if (!JudgeLayer(result, layer).admitted) return kExitCheckFailed;
  }
  for (const UnindexedAudit& unindexed : result.unindexed) {
    if (!unindexed.refused.empty()) return kExitCheckFailed;
  }
  return kExitOk;
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

}  // namespace mxdiff::checkpoint
