// `mxdiff audit`: headers, selection, scan and the verdict per kernel layer, composed; the
// report writers (report_text.cc, report_json.cc) and the exit status work on the result.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "reference/admission.h"
#include "reference/mx_spec.h"
#include "checkpoint/byte_source.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/scale_plan.h"
#include "checkpoint/scale_scan.h"

namespace mxdiff::checkpoint {

struct AuditOptions {
  SelectionOptions selection;
  ScanOptions scan;
  bool keep_going = false;  // audit the rest after an error (the exit status is still 2)
};

// A *.safetensors file beside an index that does not name it, audited as a checkpoint of its
// own (so that its names cannot collide with the index's): its verdicts count in the exit
// status, its errors are the audit's errors.
struct UnindexedAudit {
  UnindexedFile file;
  bool audited = false;               // false: its header could not be read
  size_t layers = 0;                  // kernel layers in it
  std::vector<std::string> refused;   // those refused, by name
  bool no_kernel_layer = false;       // it holds none (not an error for a file beside the index)
  uint64_t refused_bytes = 0;         // scale bytes outside the admitted set, in a layer or not
};

struct AuditResult {
  Checkpoint checkpoint;
  AuditPlan plan;
  ScanResult scan;
  size_t max_positions = 16;
  std::optional<std::string> pattern;  // --pattern, when it chose the scale tensors
  std::vector<AuditError> errors;  // all of them: headers, selection, scan
  // The audit ended at an error before judging anything (no --keep-going): its report is
  // partial and gives no verdict.
  bool stopped = false;
  std::vector<UnindexedAudit> unindexed;  // RunAudit only
};

AuditResult RunAudit(const std::vector<std::string>& paths, const AuditOptions& options);
// The same on a checkpoint already loaded, its bytes from `source` (the fuzz target, tests).
AuditResult AuditCheckpoint(Checkpoint checkpoint, const ByteSource& source, const AuditOptions& options);

struct LayerRefusal {
  size_t scale = 0;        // into plan.scales
  uint64_t index = 0;      // within that tensor
  uint64_t layer_index = 0;  // within the layer's scale bytes, kernel order
  uint8_t raw = 0;
};

struct LayerVerdict {
  bool admitted = false;
  uint64_t refused_bytes = 0;
  std::vector<LayerRefusal> first_refused;  // the first max_positions, kernel order
  ScaleHistogram histogram{};
  std::vector<LayerProblem> problems;  // the plan's, plus members that could not be read
};

// By the reference's rule: admitted exactly when the layer has no structural problem, every
// member was read, and no byte is outside FoldAdmittedBytes().
LayerVerdict JudgeLayer(const AuditResult& result, const KernelLayer& layer);

// A checkpoint in which the audit recognised no MXFP4 kernel layer: an error (exit 2), never a
// pass, since nothing was judged (names the audit does not know, or no scales at all). What
// it saw, for the user to tell which: counts by dtype and by name ending, most frequent first.
struct NoKernelLayer {
  uint64_t tensors = 0;
  std::vector<std::pair<std::string, uint64_t>> dtypes;        // "U8" -> tensors
  std::vector<std::pair<std::string, uint64_t>> name_endings;  // ".weight_scale" -> tensors
  uint64_t scale_tensors = 0;  // selected as scales, none in a kernel layer
  std::string message;         // "no MXFP4 kernel layer found: ...", one line
};
// Set when the audit ran (not stopped at an error) and found no kernel layer.
std::optional<NoKernelLayer> FindNoKernelLayer(const AuditResult& result);

// 0 every kernel layer admitted, 1 some layer refused, 2 an error (no kernel layer found is one).
int ExitStatus(const AuditResult& result);

// Per raw byte, the MX-spec deviations the ordinary kernel makes for some code under it (bit d
// for SpecDeviation d), from reference/mx_spec.h.
const std::array<uint8_t, 256>& OrdinaryDeviations();

// The flat index of a tensor element as coordinates: 17 in [4, 8] -> [2, 1].
std::vector<uint64_t> Coordinates(uint64_t index, std::span<const uint64_t> shape);

std::string TextReport(const AuditResult& result);
// The JSON report's "schema" value: written by JsonReport, required by ReadLayerVerdicts.
inline constexpr std::string_view kAuditReportSchema = "mxdiff-audit/1";
std::string JsonReport(const AuditResult& result);  // schema: checkpoint/README.md

}  // namespace mxdiff::checkpoint
