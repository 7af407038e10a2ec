// libFuzzer target over the audit's input parsers (tools/audit/): the input is a whole
// safetensors file, and also read as a sharded checkpoint's index. A parse either fails with
// a message naming the file, or yields a header whose tensors tile the data section exactly;
// the audit of a parsed file then keeps its own invariants: CountBytes (the AVX2 path) equals
// the reference's HistogramOf on every scale tensor, each layer's verdict is AdmitLayer's on the
// layer's bytes (and refused for any structural problem), and the JSON report reads back into
// verdicts that CheckAuditedVerdict accepts for those bytes. A broken invariant aborts.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <span>
#include <string>

#include "reference/admission.h"
#include "tools/audit/audit.h"
#include "tools/audit/layer_verdicts.h"
#include "tools/audit/safetensors_header.h"

namespace {

using namespace mxdiff;
using namespace mxdiff::audit;

constexpr std::string_view kFile = "fuzz.safetensors";

[[noreturn]] void Broken(const std::string& what) {
  std::fprintf(stderr, "fuzz_safetensors: invariant broken: %s\n", what.c_str());
  std::abort();
}

void Require(bool condition, const std::string& what) {
  if (!condition) Broken(what);
}

void CheckHeader(const SafetensorsHeader& header, size_t size) {
  Require(header.data_start == 8 + header.header_length && header.data_start + header.data_size == size,
          "the data section does not end at the end of the file");
  uint64_t covered = 0;
  for (size_t i = 0; i < header.tensors.size(); ++i) {
    const TensorInfo& tensor = header.tensors[i];
    Require(tensor.begin == covered && tensor.begin <= tensor.end, "tensors do not tile the data section: " + tensor.name);
    Require(tensor.elements() * uint64_t(DtypeBits(tensor.dtype)) == 8 * tensor.byte_size(),
            "byte size != elements x dtype bits: " + tensor.name);
    Require(header.Find(tensor.name) == &tensor, "by_name does not lead back to " + tensor.name);
    covered = tensor.end;
  }
  Require(covered == header.data_size && header.by_name.size() == header.tensors.size(), "coverage or names");
}

void CheckAudit(std::span<const uint8_t> bytes, SafetensorsHeader header) {
  Checkpoint checkpoint;
  AddCheckpointFile(checkpoint, std::string(kFile), std::move(header));
  const MemoryFiles source({bytes});
  AuditOptions options;
  options.scan.threads = 1;
  options.scan.chunk_bytes = 4096;
  options.scan.max_positions = 4;
  const AuditResult result = AuditCheckpoint(std::move(checkpoint), source, options);
  for (const AuditError& error : result.errors) Broken("an error on a valid file from memory: " + error.message);

  const CheckpointFile& file = result.checkpoint.files[0];
  for (size_t s = 0; s < result.plan.scales.size(); ++s) {
    const TensorInfo& tensor = result.checkpoint.tensor(result.plan.scales[s].ref);
    const std::span<const uint8_t> scale_bytes = bytes.subspan(size_t(file.header.data_start + tensor.begin),
                                                              size_t(tensor.byte_size()));
    const TensorScan& scan = result.scan.tensors[s];
    Require(scan.scanned && scan.Dense() == HistogramOf(scale_bytes), "histogram differs from HistogramOf: " + tensor.name);
    Require(scan.refused == AdmitLayer(scale_bytes).refused_count, "refused count differs: " + tensor.name);
  }
  const std::string report = JsonReport(result);
  absl::StatusOr<std::vector<AuditedLayerVerdict>> verdicts = ReadLayerVerdicts(report);
  Require(verdicts.ok() && verdicts->size() == result.plan.layers.size(),
          "the JSON report does not read back: " + std::string(verdicts.status().message()));
  for (size_t i = 0; i < result.plan.layers.size(); ++i) {
    const KernelLayer& layer = result.plan.layers[i];
    absl::StatusOr<std::vector<uint8_t>> layer_bytes = ReadLayerScaleBytes(result.checkpoint, result.plan, layer, source);
    Require(layer_bytes.ok() && layer_bytes->size() == layer.scale_bytes, "layer bytes: " + layer.name);
    const LayerVerdict verdict = JudgeLayer(result, layer);
    Require(verdict.admitted == (layer.problems.empty() && AdmitLayer(*layer_bytes).admitted),
            "the verdict is not AdmitLayer's: " + layer.name);
    Require(verdict.histogram == HistogramOf(*layer_bytes), "layer histogram: " + layer.name);
    Require((*verdicts)[i].layer == layer.name && (*verdicts)[i].admitted == verdict.admitted, "JSON verdict: " + layer.name);
    if (layer.groups > 0) {
      const absl::Status check = CheckAuditedVerdict((*verdicts)[i], layer.groups, layer.n, layer.k, *layer_bytes);
      Require(check.ok(), "CheckAuditedVerdict refuses the audit's own verdict: " + std::string(check.message()));
      Require(uint64_t(layer.groups) * uint64_t(layer.n) * uint64_t(layer.k / 32) == layer.scale_bytes,
              "layer shape does not match its bytes: " + layer.name);
    } else {
      Require(!verdict.admitted, "a layer without a shape admitted: " + layer.name);
    }
  }
  Require(!TextReport(result).empty(), "empty text report");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  absl::StatusOr<SafetensorsHeader> header = ParseSafetensorsBuffer(kFile, bytes);
  if (header.ok()) {
    CheckHeader(*header, size);
    CheckAudit(bytes, *std::move(header));
  } else {
    const std::string message(header.status().message());
    Require(message.rfind(std::string(kFile) + ": ", 0) == 0, "an error that does not name the file: " + message);
    const std::string tensor = TensorOfError(header.status());
    Require(tensor.empty() || message.find("tensor \"") != std::string::npos, "a tensor error without the tensor");
  }
  // The same bytes as an index file.
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<ShardIndex> index = ParseShardIndex("fuzz.index.json", text);
  if (index.ok()) {
    Require(!index->weight_map.empty(), "an index without tensors");
    for (const auto& [tensor, shard] : index->weight_map) {
      Require(!shard.empty() && shard.front() != '/', "an index shard that is not relative: " + shard);
      for (const std::filesystem::path& part : std::filesystem::path(shard)) {
        Require(part != "..", "an index shard outside its folder: " + shard);
      }
    }
  }
  return 0;
}
