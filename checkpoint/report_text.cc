// The short human summary `mxdiff audit` prints by default.
#include <map>
#include <optional>
#include <string>

#include "fmt/core.h"
#include "checkpoint/audit.h"
#include "checkpoint/strict_json.h"

namespace mxdiff::checkpoint {
namespace {

constexpr size_t kListedLayers = 20;  // refused layers listed one by one; the rest counted

std::string Count(uint64_t value, std::string_view noun) {
  return fmt::format("{} {}{}", value, noun, value == 1 ? "" : "s");
}

// "[5, 3]"
std::string Position(const AuditResult& result, size_t scale, uint64_t index) {
  return FormatShape(Coordinates(index, result.checkpoint.tensor(result.plan.scales[scale].ref).shape));
}

std::string LayerLine(const AuditResult& result, const KernelLayer& layer, const LayerVerdict& verdict) {
  std::string line = fmt::format("  refused {}", layer.name);
  if (layer.groups > 0) line += fmt::format(" ({} groups x N {} x K {})", layer.groups, layer.n, layer.k);
  line += ":";
  for (const LayerProblem& problem : verdict.problems) {
    line += problem.tensor.empty() ? fmt::format("\n    {}", problem.message)
                                   : fmt::format("\n    {}: {}", problem.tensor, problem.message);
  }
  if (verdict.refused_bytes > 0) {
    line += fmt::format("\n    {} outside {}", Count(verdict.refused_bytes, "scale byte"), DescribeFoldAdmittedSet());
    const size_t shown = std::min<size_t>(verdict.first_refused.size(), 3);
    for (size_t i = 0; i < shown; ++i) {
      const LayerRefusal& refused = verdict.first_refused[i];
      const ScaleTensor& scale = result.plan.scales[refused.scale];
      // A name in several files: which copy.
      const std::string in_file = result.checkpoint.copies.contains(scale.name)
                                      ? fmt::format(" in {}", result.checkpoint.files[scale.ref.file].path)
                                      : std::string();
      line += fmt::format("{}raw {} at {}{}{} (layer byte {})", i == 0 ? ": " : ", ", refused.raw, scale.name,
                          Position(result, refused.scale, refused.index), in_file, refused.layer_index);
    }
    if (verdict.refused_bytes > shown) line += ", ...";
  }
  return line + "\n";
}

// Nothing was judged: no counts or "deviations: none" that could read as a result.
std::string StoppedReport(const AuditResult& result) {
  size_t tensors = 0;
  for (const CheckpointFile& file : result.checkpoint.files) tensors += file.header.tensors.size();
  return fmt::format(
      "mxdiff audit: partial report: stopped at the first error ({} on stderr), after reading the "
      "headers of {} ({})\n"
      "verdict: none: no kernel layer was judged (--keep-going audits what can be read)\n",
      Count(result.errors.size(), "error"), Count(result.checkpoint.files.size(), "file"), Count(tensors, "tensor"));
}

// The scale bytes of the plan's scale tensors: their total size and the histogram of those scanned.
struct ScaleBytesRead {
  uint64_t bytes = 0;
  ScaleHistogram histogram{};
};
ScaleBytesRead ReadScaleBytes(const AuditResult& result) {
  ScaleBytesRead read;
  for (size_t s = 0; s < result.plan.scales.size(); ++s) {
    read.bytes += result.checkpoint.tensor(result.plan.scales[s].ref).byte_size();
    if (s < result.scan.tensors.size()) {
      for (const auto& [raw, count] : result.scan.tensors[s].histogram) read.histogram[raw] += count;
    }
  }
  return read;
}

// The first two lines: what was read (with the range of the bytes seen) and the admission rule.
std::string HeadingLines(const AuditResult& result, const ScaleBytesRead& read) {
  int min = -1, max = -1;
  for (int raw = 0; raw < 256; ++raw) {
    if (read.histogram[raw] == 0) continue;
    if (min < 0) min = raw;
    max = raw;
  }
  return fmt::format("mxdiff audit: {}, {} ({}){}\n", Count(result.checkpoint.files.size(), "file"),
                     Count(result.plan.scales.size(), "scale tensor"), Count(read.bytes, "byte"),
                     min < 0 ? std::string() : fmt::format(", raw {}..{}", min, max)) +
         fmt::format("admission rule {}\n", AdmissionRuleVersion());
}

// The admitted and refused counts, the first kListedLayers refused layers; refused_layers: their count.
std::string KernelLayerLines(const AuditResult& result, size_t& refused_layers) {
  refused_layers = 0;
  std::string refused_lines;
  for (const KernelLayer& layer : result.plan.layers) {
    const LayerVerdict verdict = JudgeLayer(result, layer);
    if (verdict.admitted) continue;
    if (refused_layers++ < kListedLayers) refused_lines += LayerLine(result, layer, verdict);
  }
  std::string text = fmt::format("kernel layers: {} admitted, {} refused\n", result.plan.layers.size() - refused_layers,
                                 refused_layers);
  text += refused_lines;
  if (refused_layers > kListedLayers) {
    text += fmt::format("  ... and {} more refused (--json lists all)\n", refused_layers - kListedLayers);
  }
  return text;
}

// MX-spec deviations of the ordinary kernel over every scale byte read.
std::string DeviationLine(const ScaleHistogram& all) {
  const std::array<uint8_t, 256>& deviations = OrdinaryDeviations();
  std::string deviation_text;
  for (int d = 1; d < kSpecDeviationCount; ++d) {
    uint64_t bytes = 0;
    int lo = -1, hi = -1;
    for (int raw = 0; raw < 256; ++raw) {
      if (all[raw] == 0 || !(deviations[raw] >> d & 1)) continue;
      bytes += all[raw];
      if (lo < 0) lo = raw;
      hi = raw;
    }
    if (bytes == 0) continue;
    deviation_text += fmt::format("{}{} {} (raw {})", deviation_text.empty() ? "" : "; ",
                                  SpecDeviationName(SpecDeviation(d)), Count(bytes, "byte"),
                                  lo == hi ? fmt::format("{}", lo) : fmt::format("{}..{}", lo, hi));
  }
  return fmt::format("MX-spec deviations of the ordinary kernel: {}\n",
                     deviation_text.empty() ? std::string("none") : deviation_text);
}

// Scale tensors in no kernel layer, grouped by why.
std::string NoKernelLayerLines(const AuditResult& result) {
  std::map<std::string, std::pair<size_t, std::string>> notes;  // reason -> count, an example
  for (const ScaleTensor& scale : result.plan.scales) {
    if (scale.layer >= 0) continue;
    auto& [count, example] = notes[scale.note_kind];
    if (count++ == 0) example = scale.name;
  }
  std::string text;
  for (const auto& [reason, entry] : notes) {
    text += fmt::format("in no kernel layer: {} ({}, e.g. {})\n", Count(entry.first, "scale tensor"), reason,
                        Quoted(entry.second));
  }
  return text;
}

// A file beside the index that it does not name, audited on its own.
std::string UnindexedLine(const UnindexedAudit& unindexed) {
  const UnindexedFile& file = unindexed.file;
  std::string line = fmt::format("not in the index {}: {}", file.index, file.file);
  if (!unindexed.audited) return line + ": its header cannot be read (see the errors)\n";
  line += fmt::format(" ({}, {} also named by the index), audited on its own: ", Count(*file.tensors, "tensor"),
                      *file.also_in_index);
  if (unindexed.no_kernel_layer) {
    line += "no MXFP4 kernel layer";
  } else {
    line += fmt::format("{}, {} refused", Count(unindexed.layers, "kernel layer"), unindexed.refused.size());
  }
  for (size_t i = 0; i < unindexed.refused.size() && i < 3; ++i) {
    line += fmt::format("{}{}", i == 0 ? " (" : ", ", unindexed.refused[i]);
  }
  if (!unindexed.refused.empty()) line += unindexed.refused.size() > 3 ? ", ...)" : ")";
  if (unindexed.refused_bytes > 0) {
    line += fmt::format("; {} outside {}", Count(unindexed.refused_bytes, "scale byte"), DescribeFoldAdmittedSet());
  }
  return line + "\n";
}

// The last line, from the exit status and the refused counts of the index and of the files beside it.
std::string VerdictLine(const AuditResult& result, size_t refused_layers, size_t unindexed_refused) {
  const int status = ExitStatus(result);
  if (status == 0) {
    return result.unindexed.empty() ? "verdict: every kernel layer admitted\n"
                                    : "verdict: every kernel layer admitted, those of the files the index does not "
                                      "name too\n";
  }
  if (status == 1 && refused_layers == 0) {
    return fmt::format(
        "verdict: every kernel layer of the index admitted, but {} refused in files beside it that "
        "it does not name\n",
        Count(unindexed_refused, "kernel layer"));
  }
  if (status == 1) {
    return fmt::format("verdict: {} of {} kernel layers refused{}\n", refused_layers, result.plan.layers.size(),
                       unindexed_refused == 0
                           ? std::string()
                           : fmt::format(", and {} in files the index does not name", unindexed_refused));
  }
  if (!result.errors.empty()) {
    return fmt::format("verdict: {} (on stderr): the audit is incomplete\n", Count(result.errors.size(), "error"));
  }
  return "verdict: no MXFP4 kernel layer found: nothing was judged, nothing is admitted\n";
}

}  // namespace

std::string TextReport(const AuditResult& result) {
  if (result.stopped) return StoppedReport(result);
  const ScaleBytesRead read = ReadScaleBytes(result);
  std::string text = HeadingLines(result, read);
  size_t refused_layers = 0;
  text += KernelLayerLines(result, refused_layers);
  text += DeviationLine(read.histogram);
  text += NoKernelLayerLines(result);
  size_t unindexed_refused = 0;
  for (const UnindexedAudit& unindexed : result.unindexed) {
    text += UnindexedLine(unindexed);
    unindexed_refused += unindexed.refused.size();
  }
  const std::optional<NoKernelLayer> no_layer = FindNoKernelLayer(result);
  if (no_layer) text += no_layer->message + "\n";
  return text + VerdictLine(result, refused_layers, unindexed_refused);
}

}  // namespace mxdiff::checkpoint
