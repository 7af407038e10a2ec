// libFuzzer target over the audit's input parsers (tools/audit/): the input is a whole
// safetensors file, and also read as a sharded checkpoint's index. A parse either fails with
// a message naming the file, or yields a header whose tensors tile the data section exactly;
// the audit of a parsed file then keeps its own invariants: CountBytes (the AVX2 path) equals
// the reference's HistogramOf on every scale tensor, each layer's verdict is AdmitLayer's on the
// layer's bytes (and refused for any structural problem), and the JSON report reads back into
// verdicts that CheckAuditedVerdict accepts for those bytes.
//
// Every invariant is a named check: a broken one is a finding `invariant/<name>` (fuzz/findings.h),
// written (input, signature, description) before the abort, as every target's findings are, so
// that findings of different invariants stay apart. The names are listed in fuzz/README.md.
// Test seam: MXDIFF_FUZZ_SAFETENSORS_PLANT=<name> makes that check fail where it is reached (the
// signature test plants two and reads their findings back).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "fmt/format.h"
#include "fuzz/findings.h"
#include "fuzz/target_driver.h"
#include "reference/admission.h"
#include "tools/audit/audit.h"
#include "tools/audit/layer_verdicts.h"
#include "tools/audit/safetensors_header.h"

namespace {

using namespace mxdiff;
using namespace mxdiff::audit;
using mxdiff::fuzz::CheckResult;
using mxdiff::fuzz::Finding;

constexpr std::string_view kTarget = "fuzz_safetensors";
constexpr std::string_view kFile = "fuzz.safetensors";

const std::string& PlantedInvariant() {
  static const std::string planted = [] {
    const char* value = std::getenv("MXDIFF_FUZZ_SAFETENSORS_PLANT");
    return std::string(value != nullptr ? value : "");
  }();
  return planted;
}

// The checks of one input: the first broken invariant becomes the finding.
class Checks {
 public:
  // True when invariant `name` holds; else records it (`describe()` says what broke) and false.
  template <typename Describe>
  bool operator()(bool holds, std::string_view name, Describe&& describe) {
    const bool planted = !PlantedInvariant().empty() && name == PlantedInvariant();
    if (holds && !planted) return true;
    if (!finding_) {
      finding_ = Finding{fmt::format("invariant/{}", name),
                         fmt::format("fuzz_safetensors: invariant {} broken: {}{}", name, std::string(describe()),
                                     planted ? " (planted by MXDIFF_FUZZ_SAFETENSORS_PLANT)" : "")};
    }
    return false;
  }
  const CheckResult& result() const { return finding_; }

 private:
  CheckResult finding_;
};

bool CheckHeader(Checks& check, const SafetensorsHeader& header, size_t size) {
  if (!check(header.data_start == 8 + header.header_length && header.data_start + header.data_size == size,
             "header-data-end", [] { return "the data section does not end at the end of the file"; })) {
    return false;
  }
  uint64_t covered = 0;
  for (size_t i = 0; i < header.tensors.size(); ++i) {
    const TensorInfo& tensor = header.tensors[i];
    if (!check(tensor.begin == covered && tensor.begin <= tensor.end, "header-tiling",
               [&] { return "tensors do not tile the data section: " + tensor.name; }) ||
        !check(tensor.elements() * uint64_t(DtypeBits(tensor.dtype)) == 8 * tensor.byte_size(), "header-byte-size",
               [&] { return "byte size != elements x dtype bits: " + tensor.name; }) ||
        !check(header.Find(tensor.name) == &tensor, "header-names",
               [&] { return "by_name does not lead back to " + tensor.name; })) {
      return false;
    }
    covered = tensor.end;
  }
  return check(covered == header.data_size && header.by_name.size() == header.tensors.size(), "header-coverage",
               [] { return "the tensors do not cover the data section, or by_name has other names"; });
}

// The audit's verdicts against the reference, over bytes read from `source` on their own.
bool CheckVerdicts(Checks& check, const AuditResult& result, const ByteSource& source) {
  for (size_t s = 0; s < result.plan.scales.size(); ++s) {
    const TensorRef ref = result.plan.scales[s].ref;
    const TensorInfo& tensor = result.checkpoint.tensor(ref);
    absl::StatusOr<ByteWindow> window =
        source.Window(ref.file, result.checkpoint.files[ref.file].header.data_start + tensor.begin, tensor.byte_size());
    if (!check(window.ok(), "scale-bytes-readable",
               [&] { return "a scale tensor's bytes cannot be read again: " + tensor.name; })) {
      return false;
    }
    const std::span<const uint8_t> scale_bytes = window->bytes();
    const TensorScan& scan = result.scan.tensors[s];
    if (!check(scan.scanned && scan.Dense() == HistogramOf(scale_bytes), "scan-histogram",
               [&] { return "histogram differs from HistogramOf: " + tensor.name; }) ||
        !check(scan.refused == AdmitLayer(scale_bytes).refused_count, "scan-refused-count",
               [&] { return "refused count differs from AdmitLayer's: " + tensor.name; })) {
      return false;
    }
  }
  const std::string report = JsonReport(result);
  absl::StatusOr<std::vector<AuditedLayerVerdict>> verdicts = ReadLayerVerdicts(report);
  if (!check(verdicts.ok() && verdicts->size() == result.plan.layers.size(), "json-reads-back",
             [&] { return "the JSON report does not read back: " + std::string(verdicts.status().message()); })) {
    return false;
  }
  for (size_t i = 0; i < result.plan.layers.size(); ++i) {
    const KernelLayer& layer = result.plan.layers[i];
    absl::StatusOr<std::vector<uint8_t>> layer_bytes = ReadLayerScaleBytes(result.checkpoint, result.plan, layer, source);
    const LayerVerdict verdict = JudgeLayer(result, layer);
    const bool structural = !verdict.problems.empty();
    if (!check(layer_bytes.ok() && layer_bytes->size() == layer.scale_bytes, "layer-bytes",
               [&] { return "a layer's bytes in kernel order: " + layer.name; }) ||
        !check(verdict.admitted == (!structural && AdmitLayer(*layer_bytes).admitted), "layer-verdict",
               [&] { return "the verdict is not AdmitLayer's: " + layer.name; }) ||
        !check(verdict.histogram == HistogramOf(*layer_bytes), "layer-histogram",
               [&] { return "the layer's histogram is not HistogramOf its bytes: " + layer.name; }) ||
        !check((*verdicts)[i].layer == layer.name && (*verdicts)[i].admitted == verdict.admitted, "json-verdict",
               [&] { return "the JSON verdict is not the audit's: " + layer.name; })) {
      return false;
    }
    if (layer.groups > 0 && !structural) {
      const absl::Status accepted = CheckAuditedVerdict((*verdicts)[i], layer.groups, layer.n, layer.k, *layer_bytes);
      if (!check(accepted.ok(), "verdict-accepted",
                 [&] { return "CheckAuditedVerdict refuses the audit's own verdict: " + std::string(accepted.message()); }) ||
          !check(uint64_t(layer.groups) * uint64_t(layer.n) * uint64_t(layer.k / 32) == layer.scale_bytes,
                 "layer-shape", [&] { return "layer shape does not match its bytes: " + layer.name; })) {
        return false;
      }
    } else if (!check(!verdict.admitted, "unshaped-layer-refused",
                      [&] { return "a layer without a shape or with a problem admitted: " + layer.name; })) {
      return false;
    }
  }
  return check(!TextReport(result).empty(), "text-report", [] { return "empty text report"; });
}

bool CheckAudit(Checks& check, std::span<const uint8_t> bytes, SafetensorsHeader header) {
  Checkpoint checkpoint;
  AddCheckpointFile(checkpoint, std::string(kFile), std::move(header));
  const MemoryFiles source({bytes});
  AuditOptions options;
  options.scan.threads = 1;
  options.scan.chunk_bytes = 4096;
  options.scan.max_positions = 4;
  const AuditResult result = AuditCheckpoint(std::move(checkpoint), source, options);
  if (!check(result.errors.empty(), "no-error-from-memory",
             [&] { return "an error on a valid file from memory: " + result.errors.front().message; })) {
    return false;
  }
  return CheckVerdicts(check, result, source);
}

void CheckSingleFile(Checks& check, std::span<const uint8_t> bytes) {
  absl::StatusOr<SafetensorsHeader> header = ParseSafetensorsBuffer(kFile, bytes);
  if (header.ok()) {
    if (!CheckHeader(check, *header, bytes.size()) || !CheckAudit(check, bytes, *std::move(header))) return;
  } else {
    const std::string message(header.status().message());
    const std::string tensor = TensorOfError(header.status());
    if (!check(message.rfind(std::string(kFile) + ": ", 0) == 0, "error-names-file",
               [&] { return "an error that does not name the file: " + message; }) ||
        !check(tensor.empty() || message.find("tensor \"") != std::string::npos, "error-names-tensor",
               [&] { return "a tensor error without the tensor: " + message; })) {
      return;
    }
  }
  // The same bytes as an index file.
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  absl::StatusOr<ShardIndex> index = ParseShardIndex("fuzz.index.json", text);
  if (!index.ok()) return;
  if (!check(!index->weight_map.empty(), "index-not-empty", [] { return "an index without tensors"; })) return;
  for (const auto& entry : index->weight_map) {
    const std::string& shard = entry.second;
    bool inside = !shard.empty() && shard.front() != '/';
    for (const std::filesystem::path& part : std::filesystem::path(shard)) inside = inside && part != "..";
    if (!check(inside, "index-shard-inside-folder", [&] { return "an index shard outside its folder: " + shard; })) {
      return;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  return mxdiff::fuzz::CheckFuzzInput(kTarget, bytes, [&](bool /*fresh: the target keeps no state*/) {
    Checks check;
    CheckSingleFile(check, bytes);
    return std::optional<CheckResult>(check.result());
  });
}
