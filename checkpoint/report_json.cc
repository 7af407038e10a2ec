// `mxdiff audit --json`: the machine-readable report (schema in checkpoint/README.md).
#include <optional>
#include <string>

#include "nlohmann/json.hpp"
#include "checkpoint/audit.h"
#include "checkpoint/json_bytes.h"

namespace mxdiff::checkpoint {
namespace {

using Json = nlohmann::ordered_json;

Json HistogramJson(const ScaleHistogram& histogram) {
  Json bins = Json::object();
  for (int raw = 0; raw < 256; ++raw) {
    if (histogram[raw] != 0) bins[std::to_string(raw)] = histogram[raw];
  }
  return bins;
}

Json ShapeJson(std::span<const uint64_t> shape) { return Json(std::vector<uint64_t>(shape.begin(), shape.end())); }

Json DeviationsJson(const ScaleHistogram& histogram) {
  const std::array<uint8_t, 256>& deviations = OrdinaryDeviations();
  Json list = Json::array();
  for (int d = 1; d < kSpecDeviationCount; ++d) {
    uint64_t bytes = 0;
    Json raws = Json::array();
    for (int raw = 0; raw < 256; ++raw) {
      if (histogram[raw] != 0 && (deviations[raw] >> d & 1)) {
        bytes += histogram[raw];
        raws.push_back(raw);
      }
    }
    if (bytes == 0) continue;
    list.push_back({{"kind", std::string(SpecDeviationName(SpecDeviation(d)))}, {"scale_bytes", bytes}, {"raw", raws}});
  }
  return list;
}

Json TensorJson(const AuditResult& result, size_t s) {
  const ScaleTensor& scale = result.plan.scales[s];
  const TensorInfo& info = result.checkpoint.tensor(scale.ref);
  const TensorScan& scan = result.scan.tensors.size() > s ? result.scan.tensors[s] : TensorScan{};
  Json tensor = {{"name", scale.name},
                 {"file", result.checkpoint.files[scale.ref.file].path},
                 {"dtype", std::string(DtypeName(info.dtype))},
                 {"shape", ShapeJson(info.shape)}};
  if (scale.weight) {
    const TensorInfo& weight = result.checkpoint.tensor(*scale.weight);
    tensor["weight"] = {{"name", weight.name}, {"dtype", std::string(DtypeName(weight.dtype))}, {"shape", ShapeJson(weight.shape)}};
  } else {
    tensor["weight"] = nullptr;
  }
  tensor["layer"] = scale.layer >= 0 ? Json(result.plan.layers[size_t(scale.layer)].name) : Json(nullptr);
  tensor["note"] = scale.note.empty() ? Json(nullptr) : Json(scale.note);
  tensor["scale_bytes"] = info.byte_size();
  tensor["scanned"] = scan.scanned;
  const ScaleHistogram histogram = scan.Dense();
  tensor["min"] = scan.histogram.empty() ? Json(nullptr) : Json(scan.histogram.front().first);
  tensor["max"] = scan.histogram.empty() ? Json(nullptr) : Json(scan.histogram.back().first);
  tensor["nan_bytes"] = histogram[0xFF];
  tensor["histogram"] = HistogramJson(histogram);
  tensor["refused_bytes"] = scan.refused;
  Json first = Json::array();
  for (const RefusedScale& refused : scan.first_refused) {
    first.push_back({{"index", refused.index}, {"position", Coordinates(refused.index, info.shape)}, {"raw", refused.raw}});
  }
  tensor["first_refused"] = std::move(first);
  tensor["spec_deviations"] = DeviationsJson(histogram);
  return tensor;
}

Json LayerJson(const AuditResult& result, const KernelLayer& layer) {
  const LayerVerdict verdict = JudgeLayer(result, layer);
  Json json = {{"name", layer.name},
               {"kind", std::string(LayerKindName(layer.kind))},
               {"verdict", verdict.admitted ? "admitted" : "refused"},
               {"admitted", verdict.admitted}};
  json["groups"] = layer.groups > 0 ? Json(layer.groups) : Json(nullptr);
  json["n"] = layer.n > 0 ? Json(layer.n) : Json(nullptr);
  json["k"] = layer.k > 0 ? Json(layer.k) : Json(nullptr);
  json["scale_bytes"] = layer.scale_bytes;
  json["refused_bytes"] = verdict.refused_bytes;
  json["histogram"] = HistogramJson(verdict.histogram);
  Json tensors = Json::array();
  for (size_t s : layer.members) tensors.push_back(result.plan.scales[s].name);
  json["tensors"] = std::move(tensors);
  json["unread_tensors"] = layer.unread;
  Json problems = Json::array();
  for (const LayerProblem& problem : verdict.problems) {
    problems.push_back({{"tensor", problem.tensor.empty() ? Json(nullptr) : Json(problem.tensor)},
                        {"message", problem.message}});
  }
  json["problems"] = std::move(problems);
  Json first = Json::array();
  for (const LayerRefusal& refused : verdict.first_refused) {
    const ScaleTensor& scale = result.plan.scales[refused.scale];
    first.push_back({{"tensor", scale.name},
                     {"file", result.checkpoint.files[scale.ref.file].path},
                     {"index", refused.index},
                     {"position", Coordinates(refused.index, result.checkpoint.tensor(scale.ref).shape)},
                     {"layer_index", refused.layer_index},
                     {"raw", refused.raw}});
  }
  json["first_refused"] = std::move(first);
  return json;
}

}  // namespace

std::string JsonReport(const AuditResult& result) {
  Json report;
  report["schema"] = kAuditReportSchema;
  report["admission_rule"] = {{"version", AdmissionRuleVersion()}, {"admitted_raw", DescribeFoldAdmittedSet()}};
  report["inputs"] = result.checkpoint.inputs;
  report["exit_status"] = ExitStatus(result);
  // Stopped at an error (no --keep-going): nothing was judged, so no layer or tensor is listed.
  report["partial"] = result.stopped;
  if (const std::optional<NoKernelLayer> no_layer = FindNoKernelLayer(result)) {
    auto counts = [](const std::vector<std::pair<std::string, uint64_t>>& list) {
      Json object = Json::object();
      for (const auto& [key, count] : list) object[key] = count;
      return object;
    };
    report["no_kernel_layer"] = {{"message", no_layer->message},
                                 {"tensors", no_layer->tensors},
                                 {"dtypes", counts(no_layer->dtypes)},
                                 {"name_endings", counts(no_layer->name_endings)},
                                 {"scale_tensors", no_layer->scale_tensors}};
  } else {
    report["no_kernel_layer"] = nullptr;
  }
  size_t tensors = 0, admitted = 0, other = 0;
  uint64_t scale_bytes = 0;
  for (const CheckpointFile& file : result.checkpoint.files) tensors += file.header.tensors.size();
  Json layers = Json::array();
  const std::vector<KernelLayer> none;
  const std::vector<KernelLayer>& judged = result.stopped ? none : result.plan.layers;
  for (const KernelLayer& layer : judged) {
    layers.push_back(LayerJson(result, layer));
    admitted += layers.back()["admitted"].get<bool>() ? 1 : 0;
  }
  Json scales = Json::array();
  const size_t listed_scales = result.stopped ? 0 : result.plan.scales.size();
  for (size_t s = 0; s < listed_scales; ++s) {
    scales.push_back(TensorJson(result, s));
    scale_bytes += result.checkpoint.tensor(result.plan.scales[s].ref).byte_size();
    other += result.plan.scales[s].layer < 0 ? 1 : 0;
  }
  report["summary"] = {{"files", result.checkpoint.files.size()},
                       {"tensors", tensors},
                       {"scale_tensors", listed_scales},
                       {"scale_bytes", scale_bytes},
                       {"layers", judged.size()},
                       {"admitted_layers", admitted},
                       {"refused_layers", judged.size() - admitted},
                       {"scale_tensors_in_no_layer", other},
                       {"errors", result.errors.size()}};
  report["layers"] = std::move(layers);
  report["tensors"] = std::move(scales);
  Json errors = Json::array();
  for (const AuditError& error : result.errors) {
    errors.push_back({{"file", error.file.empty() ? Json(nullptr) : Json(error.file)},
                      {"tensor", error.tensor.empty() ? Json(nullptr) : Json(error.tensor)},
                      {"message", error.message}});
  }
  report["errors"] = std::move(errors);
  Json unindexed = Json::array();
  for (const UnindexedAudit& audit : result.unindexed) {
    const UnindexedFile& file = audit.file;
    unindexed.push_back({{"file", file.file},
                         {"index", file.index},
                         {"tensors", file.tensors ? Json(*file.tensors) : Json(nullptr)},
                         {"also_in_index", file.also_in_index ? Json(*file.also_in_index) : Json(nullptr)},
                         {"audited", audit.audited},
                         {"layers", audit.layers},
                         {"refused_layers", audit.refused},
                         {"no_kernel_layer", audit.no_kernel_layer},
                         {"refused_bytes", audit.refused_bytes}});
  }
  report["unindexed_files"] = std::move(unindexed);
  // Names and paths come from the input and may hold any bytes: DumpJson keeps the output valid
  // JSON and escapes a byte that is not UTF-8 as \udcXX, losslessly (checkpoint/json_bytes.h).
  return cli::DumpJson(report) + "\n";
}

}  // namespace mxdiff::checkpoint
