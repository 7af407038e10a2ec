// libFuzzer target over the audit's input parsers (checkpoint/): the input is a whole
// safetensors file, and also read as a sharded checkpoint's index. A parse either fails with
// a message naming the file, or yields a header whose tensors tile the data section exactly;
// the audit of a parsed file then keeps its own invariants: CountBytes (the AVX2 path) equals
// the reference's HistogramOf on every scale tensor, each layer's verdict is AdmitLayer's on the
// layer's bytes (and refused for any structural problem), and the JSON report reads back into
// verdicts that CheckAuditedVerdict accepts for those bytes.
//
// An input that starts with "MXSB" is a bundle of several files (DecodeBundle: an index and its
// shards, a layer's experts split across files, a stray file beside an index, a name in two
// files): they are written to a folder of this process's own and audited as that checkpoint
// folder with --keep-going, and the index's rules (checkpoint/README.md) become checks too.
//
// Every invariant is a named check: a broken one is a finding `invariant/<name>` (fuzz/driver/findings.h),
// written (input, signature, description) before the abort, as every target's findings are, so
// that findings of different invariants stay apart. The names are listed in fuzz/README.md.
// Every check whose inputs are there runs (a broken one stops only the checks that read what it
// vouches for) and every broken one is kept: the input's finding is the first, naming the others.
// Test seam: MXDIFF_FUZZ_SAFETENSORS_PLANT=<name>[,<name>...] makes those checks fail where they
// are reached (the rest of the input is checked on, as if they held).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

#include "fmt/format.h"
#include "fuzz/driver/findings.h"
#include "fuzz/driver/fuzz_target.h"
#include "fuzz/driver/target_driver.h"
#include "reference/admission.h"
#include "checkpoint/audit.h"
#include "checkpoint/layer_verdicts.h"
#include "checkpoint/safetensors_header.h"

namespace {

using namespace mxdiff;
using namespace mxdiff::checkpoint;
using mxdiff::fuzz::CheckResult;
using mxdiff::fuzz::Finding;

constexpr std::string_view kTarget = "fuzz_safetensors";
constexpr std::string_view kFile = "fuzz.safetensors";

// Its named checks, in the order fuzz/README.md lists them (the target's check_names).
constexpr std::string_view kInvariants[] = {
    "header-data-end", "header-tiling", "header-byte-size", "header-names", "header-coverage", "error-names-file",
    "error-names-tensor", "no-error-from-memory", "scale-bytes-readable", "scan-histogram", "scan-refused-count",
    "json-reads-back", "layer-bytes", "layer-verdict", "layer-histogram", "json-verdict", "verdict-accepted",
    "layer-shape", "unshaped-layer-refused", "text-report", "index-not-empty", "index-shard-inside-folder",
    "bundle-read-inside-folder", "bundle-index-accounted", "bundle-unread-is-error", "bundle-copies-are-error",
    "bundle-error-exit-status", "bundle-scan-reads", "bundle-unread-refuses-layer",
    "bundle-unread-weight-refuses-layer", "bundle-copies-refuse-layer", "bundle-strict-agrees"};

bool Planted(std::string_view name) {
  static const std::set<std::string, std::less<>> planted = [] {
    std::set<std::string, std::less<>> names;
    const char* value = std::getenv("MXDIFF_FUZZ_SAFETENSORS_PLANT");
    std::string_view rest = value != nullptr ? value : "";
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      names.emplace(rest.substr(0, comma));
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
    return names;
  }();
  return planted.contains(name);
}

// The checks of one input: every broken invariant is kept (the first time it breaks).
class Checks {
 public:
  // True when invariant `name` holds (a planted one is recorded, and holds for what follows);
  // else records it (`describe()` says what broke) and false.
  template <typename Describe>
  bool operator()(bool holds, std::string_view name, Describe&& describe) {
    const bool planted = Planted(name);
    if (holds && !planted) return true;
    const std::string signature = fmt::format("invariant/{}", name);
    if (!broken_.insert(signature).second) return holds;
    findings_.push_back(Finding{signature, fmt::format("fuzz_safetensors: invariant {} broken: {}{}", name,
                                                       std::string(describe()),
                                                       planted ? " (planted by MXDIFF_FUZZ_SAFETENSORS_PLANT)" : "")});
    return holds;
  }
  const std::vector<Finding>& findings() const { return findings_; }

 private:
  std::set<std::string, std::less<>> broken_;
  std::vector<Finding> findings_;
};

// Each of the header's invariants, every one checked (they read only the header); true when all hold.
bool CheckHeader(Checks& check, const SafetensorsHeader& header, size_t size) {
  bool ok = check(header.data_start == 8 + header.header_length && header.data_start + header.data_size == size,
                  "header-data-end", [] { return "the data section does not end at the end of the file"; });
  uint64_t covered = 0;
  for (size_t i = 0; i < header.tensors.size(); ++i) {
    const TensorInfo& tensor = header.tensors[i];
    ok &= check(tensor.begin == covered && tensor.begin <= tensor.end, "header-tiling",
                [&] { return "tensors do not tile the data section: " + tensor.name; });
    ok &= check(tensor.elements() * uint64_t(DtypeBits(tensor.dtype)) == 8 * tensor.byte_size(), "header-byte-size",
                [&] { return "byte size != elements x dtype bits: " + tensor.name; });
    ok &= check(header.Find(tensor.name) == &tensor, "header-names",
                [&] { return "by_name does not lead back to " + tensor.name; });
    covered = tensor.end;
  }
  ok &= check(covered == header.data_size && header.by_name.size() == header.tensors.size(), "header-coverage",
              [] { return "the tensors do not cover the data section, or by_name has other names"; });
  return ok;
}

// Each scale tensor's scan against the reference, over its bytes read from `source` on their own.
void CheckScans(Checks& check, const AuditResult& result, const ByteSource& source) {
  for (size_t s = 0; s < result.plan.scales.size(); ++s) {
    const TensorRef ref = result.plan.scales[s].ref;
    const TensorInfo& tensor = result.checkpoint.tensor(ref);
    absl::StatusOr<ByteWindow> window =
        source.Window(ref.file, result.checkpoint.files[ref.file].header.data_start + tensor.begin, tensor.byte_size());
    if (!check(window.ok(), "scale-bytes-readable",
               [&] { return "a scale tensor's bytes cannot be read again: " + tensor.name; })) {
      continue;
    }
    const std::span<const uint8_t> scale_bytes = window->bytes();
    const TensorScan& scan = result.scan.tensors[s];
    check(scan.scanned && scan.Dense() == HistogramOf(scale_bytes), "scan-histogram",
          [&] { return "histogram differs from HistogramOf: " + tensor.name; });
    check(scan.refused == AdmitLayer(scale_bytes).refused_count, "scan-refused-count",
          [&] { return "refused count differs from AdmitLayer's: " + tensor.name; });
  }
}

// One layer's verdict against the reference; `read_back`: its verdict as the JSON report reads
// back (null when the report did not read back).
void CheckLayer(Checks& check, const AuditResult& result, const KernelLayer& layer, const ByteSource& source,
                const AuditedLayerVerdict* read_back) {
  absl::StatusOr<std::vector<uint8_t>> layer_bytes = ReadLayerScaleBytes(result.checkpoint, result.plan, layer, source);
  const LayerVerdict verdict = JudgeLayer(result, layer);
  const bool structural = !verdict.problems.empty();
  const bool bytes = check(layer_bytes.ok() && layer_bytes->size() == layer.scale_bytes, "layer-bytes",
                           [&] { return "a layer's bytes in kernel order: " + layer.name; });
  if (bytes) {
    check(verdict.admitted == (!structural && AdmitLayer(*layer_bytes).admitted), "layer-verdict",
          [&] { return "the verdict is not AdmitLayer's: " + layer.name; });
    check(verdict.histogram == HistogramOf(*layer_bytes), "layer-histogram",
          [&] { return "the layer's histogram is not HistogramOf its bytes: " + layer.name; });
  }
  if (read_back != nullptr) {
    check(read_back->layer == layer.name && read_back->admitted == verdict.admitted, "json-verdict",
          [&] { return "the JSON verdict is not the audit's: " + layer.name; });
  }
  if (!bytes) return;
  if (layer.groups > 0 && !structural) {
    if (read_back != nullptr) {
      const absl::Status accepted = CheckAuditedVerdict(*read_back, layer.groups, layer.n, layer.k, *layer_bytes);
      check(accepted.ok(), "verdict-accepted",
            [&] { return "CheckAuditedVerdict refuses the audit's own verdict: " + std::string(accepted.message()); });
    }
    check(uint64_t(layer.groups) * uint64_t(layer.n) * uint64_t(layer.k / 32) == layer.scale_bytes, "layer-shape",
          [&] { return "layer shape does not match its bytes: " + layer.name; });
  } else {
    check(!verdict.admitted, "unshaped-layer-refused",
          [&] { return "a layer without a shape or with a problem admitted: " + layer.name; });
  }
}

// The audit's verdicts against the reference, over bytes read from `source` on their own.
void CheckVerdicts(Checks& check, const AuditResult& result, const ByteSource& source) {
  CheckScans(check, result, source);
  const std::string report = JsonReport(result);
  absl::StatusOr<std::vector<AuditedLayerVerdict>> verdicts = ReadLayerVerdicts(report);
  const bool read_back =
      check(verdicts.ok() && verdicts->size() == result.plan.layers.size(), "json-reads-back",
            [&] { return "the JSON report does not read back: " + std::string(verdicts.status().message()); });
  for (size_t i = 0; i < result.plan.layers.size(); ++i) {
    CheckLayer(check, result, result.plan.layers[i], source, read_back ? &(*verdicts)[i] : nullptr);
  }
  check(!TextReport(result).empty(), "text-report", [] { return "empty text report"; });
}

void CheckAudit(Checks& check, std::span<const uint8_t> bytes, SafetensorsHeader header) {
  Checkpoint checkpoint;
  AddCheckpointFile(checkpoint, std::string(kFile), std::move(header));
  const MemoryFiles source({bytes});
  AuditOptions options;
  options.scan.threads = 1;
  options.scan.chunk_bytes = 4096;
  options.scan.max_positions = 4;
  const AuditResult result = AuditCheckpoint(std::move(checkpoint), source, options);
  if (!check(result.errors.empty(), "no-error-from-memory", [&] {
        return "an error on a valid file from memory: " + (result.errors.empty() ? "" : result.errors.front().message);
      })) {
    return;
  }
  CheckVerdicts(check, result, source);
}

// The file parses into a header that keeps CheckHeader's invariants, or fails naming the file.
// The header when it parsed.
std::optional<SafetensorsHeader> CheckParse(Checks& check, std::string_view file, std::span<const uint8_t> bytes,
                                            bool* ok) {
  absl::StatusOr<SafetensorsHeader> header = ParseSafetensorsBuffer(file, bytes);
  if (header.ok()) {
    *ok = CheckHeader(check, *header, bytes.size());
    return *std::move(header);
  }
  const std::string message(header.status().message());
  const std::string tensor = TensorOfError(header.status());
  *ok = check(message.rfind(std::string(file) + ": ", 0) == 0, "error-names-file",
              [&] { return "an error that does not name the file: " + message; });
  *ok &= check(tensor.empty() || message.find("tensor \"") != std::string::npos, "error-names-tensor",
               [&] { return "a tensor error without the tensor: " + message; });
  return std::nullopt;
}

void CheckSingleFile(Checks& check, std::span<const uint8_t> bytes) {
  bool ok = true;
  std::optional<SafetensorsHeader> header = CheckParse(check, kFile, bytes, &ok);
  if (ok && header) CheckAudit(check, bytes, *std::move(header));
  // The same bytes as an index file.
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  absl::StatusOr<ShardIndex> index = ParseShardIndex("fuzz.index.json", text);
  if (!index.ok()) return;
  if (!check(!index->weight_map.empty(), "index-not-empty", [] { return "an index without tensors"; })) return;
  for (const auto& entry : index->weight_map) {
    const std::string& shard = entry.second;
    bool inside = !shard.empty() && shard.front() != '/';
    for (const std::filesystem::path& part : std::filesystem::path(shard)) inside = inside && part != "..";
    check(inside, "index-shard-inside-folder", [&] { return "an index shard outside its folder: " + shard; });
  }
}

// The bundle form: "MXSB", a count (u8), then per file a name (u8 length, the bytes) and its
// contents (u32 little-endian length, the bytes), nothing after the last. Strict: a count in
// 1..kMaxBundleFiles, names of 1..kMaxBundleName characters of [A-Za-z0-9._-] not starting with
// '.', each once, every length within the input. Anything else is no input (-1).
constexpr std::string_view kBundleMagic = "MXSB";
constexpr size_t kMaxBundleFiles = 8;
constexpr size_t kMaxBundleName = 64;

struct BundleFile {
  std::string name;
  std::span<const uint8_t> bytes;
};

bool BundleName(std::string_view name) {
  if (name.empty() || name.size() > kMaxBundleName || name.front() == '.') return false;
  for (char c : name) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                       c == '_' || c == '-';
    if (!plain) return false;
  }
  return true;
}

std::optional<std::vector<BundleFile>> DecodeBundle(std::span<const uint8_t> input) {
  size_t at = kBundleMagic.size();
  if (input.size() < at + 1 || std::memcmp(input.data(), kBundleMagic.data(), at) != 0) return std::nullopt;
  const size_t count = input[at++];
  if (count == 0 || count > kMaxBundleFiles) return std::nullopt;
  std::vector<BundleFile> files;
  std::set<std::string, std::less<>> names;
  for (size_t i = 0; i < count; ++i) {
    if (at >= input.size()) return std::nullopt;
    const size_t name_length = input[at++];
    if (input.size() - at < name_length + 4) return std::nullopt;
    std::string name(reinterpret_cast<const char*>(input.data() + at), name_length);
    at += name_length;
    const uint32_t length = uint32_t(input[at]) | uint32_t(input[at + 1]) << 8 | uint32_t(input[at + 2]) << 16 |
                            uint32_t(input[at + 3]) << 24;
    at += 4;
    if (!BundleName(name) || !names.insert(name).second || input.size() - at < length) return std::nullopt;
    files.push_back(BundleFile{std::move(name), input.subspan(at, length)});
    at += length;
  }
  if (at != input.size()) return std::nullopt;
  return files;
}

// This process's folder for bundles, emptied before each one (removed at exit).
class BundleFolder {
 public:
  BundleFolder()
      : path_(std::filesystem::temp_directory_path() / fmt::format("mxdiff-fuzz-safetensors-{}", getpid())) {}
  ~BundleFolder() {
    std::error_code error;
    std::filesystem::remove_all(path_, error);
  }
  // The folder holding exactly `files`; false when it cannot be written (no finding: the machine's).
  bool Write(const std::vector<BundleFile>& files) {
    std::error_code error;
    std::filesystem::remove_all(path_, error);
    std::filesystem::create_directories(path_, error);
    if (error) return false;
    for (const BundleFile& file : files) {
      std::ofstream stream(path_ / file.name, std::ios::binary);
      stream.write(reinterpret_cast<const char*>(file.bytes.data()), std::streamsize(file.bytes.size()));
      if (!stream.flush()) return false;
    }
    return true;
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

bool Inside(const std::filesystem::path& folder, const std::string& file) {
  std::error_code error;
  return std::filesystem::weakly_canonical(file, error).parent_path() == folder;
}

// A layer member's names: the scale tensor and its weight.
bool LayerNames(const AuditPlan& plan, const KernelLayer& layer, const auto& contains) {
  for (size_t s : layer.members) {
    const ScaleTensor& scale = plan.scales[s];
    if (contains(scale.name) || (!scale.weight_name.empty() && contains(scale.weight_name))) return true;
  }
  return false;
}

// Every file the audit read is inside the bundle's folder (`canonical`).
void CheckReadInside(Checks& check, const Checkpoint& checkpoint, const std::filesystem::path& canonical) {
  for (const CheckpointFile& file : checkpoint.files) {
    check(Inside(canonical, file.path), "bundle-read-inside-folder",
          [&] { return "the audit read a file outside the checkpoint's folder: " + file.path; });
  }
  for (const UnindexedFile& file : checkpoint.unindexed) {
    check(Inside(canonical, file.file), "bundle-read-inside-folder",
          [&] { return "an unindexed file outside the checkpoint's folder: " + file.file; });
  }
}

// Every tensor the (one) index names is read, or unread and so refusing its layer.
void CheckIndexAccounted(Checks& check, const Checkpoint& checkpoint, const std::vector<const BundleFile*>& indexes) {
  if (indexes.size() != 1) return;
  const std::string_view text(reinterpret_cast<const char*>(indexes[0]->bytes.data()), indexes[0]->bytes.size());
  std::vector<AuditError> entry_errors;
  absl::StatusOr<ShardIndex> index = ParseShardIndex(indexes[0]->name, text, &entry_errors);
  if (!index.ok()) return;
  std::vector<std::string> named;
  for (const auto& entry : index->weight_map) named.push_back(entry.first);
  for (const auto& entry : index->unfollowed) named.push_back(entry.first);
  for (const std::string& tensor : named) {
    check(checkpoint.by_name.contains(tensor) || checkpoint.unread.contains(tensor), "bundle-index-accounted",
          [&] { return "a tensor the index names is neither read nor unread: " + tensor; });
  }
}

// Unread tensors and names in two files are errors and refuse their layers.
void CheckBundleErrors(Checks& check, const AuditResult& result) {
  const Checkpoint& checkpoint = result.checkpoint;
  check(checkpoint.unread.empty() || !result.errors.empty(), "bundle-unread-is-error",
        [] { return "tensors the index names were not read, with no error"; });
  check(checkpoint.copies.empty() || !result.errors.empty(), "bundle-copies-are-error",
        [] { return "a name in two files, with no error"; });
  check(result.errors.empty() || ExitStatus(result) == 2, "bundle-error-exit-status",
        [&] { return fmt::format("errors, and exit status {}", ExitStatus(result)); });
  check(!result.stopped && result.scan.errors.empty(), "bundle-scan-reads", [&] {
    return "a scan error on the bundle's own files: " +
           (result.scan.errors.empty() ? std::string("stopped") : result.scan.errors.front().message);
  });
  for (const KernelLayer& layer : result.plan.layers) {
    const bool admitted = JudgeLayer(result, layer).admitted;
    check(layer.unread.empty() || !admitted, "bundle-unread-refuses-layer",
          [&] { return "a layer with a tensor the index names but that was not read is admitted: " + layer.name; });
    check(!LayerNames(result.plan, layer, [&](const std::string& name) { return checkpoint.unread.contains(name); }) ||
              !admitted,
          "bundle-unread-weight-refuses-layer",
          [&] { return "a layer whose weight was not read is admitted: " + layer.name; });
    check(!LayerNames(result.plan, layer, [&](const std::string& name) { return checkpoint.copies.contains(name); }) ||
              !admitted,
          "bundle-copies-refuse-layer", [&] { return "a layer with a name in two files is admitted: " + layer.name; });
  }
}

// Without --keep-going (`strict`): stopped exactly when there was an error, else the same verdicts.
void CheckStrictAgrees(Checks& check, const AuditResult& result, const AuditResult& strict) {
  if (!check(strict.errors.empty() == result.errors.empty(), "bundle-strict-agrees", [&] {
        return fmt::format("{} error(s) with --keep-going, {} without", result.errors.size(), strict.errors.size());
      })) {
    return;
  }
  if (!result.errors.empty()) return;
  bool same = strict.plan.layers.size() == result.plan.layers.size();
  for (size_t i = 0; same && i < result.plan.layers.size(); ++i) {
    same = strict.plan.layers[i].name == result.plan.layers[i].name &&
           JudgeLayer(strict, strict.plan.layers[i]).admitted == JudgeLayer(result, result.plan.layers[i]).admitted;
  }
  check(same, "bundle-strict-agrees", [] { return "other verdicts without --keep-going"; });
}

void CheckBundle(Checks& check, const std::vector<BundleFile>& files) {
  static BundleFolder folder;
  // Each member as a file on its own: parsed or refused with its name.
  std::vector<const BundleFile*> indexes;
  bool parsed = true;
  for (const BundleFile& file : files) {
    if (file.name.ends_with(".safetensors.index.json")) indexes.push_back(&file);
    if (!file.name.ends_with(".safetensors")) continue;
    bool ok = true;
    CheckParse(check, file.name, file.bytes, &ok);
    parsed = parsed && ok;
  }
  if (!parsed || !folder.Write(files)) return;
  std::error_code error;
  const std::filesystem::path canonical = std::filesystem::weakly_canonical(folder.path(), error);
  AuditOptions options;
  options.scan.threads = 1;
  options.scan.chunk_bytes = 4096;
  options.scan.max_positions = 4;
  options.keep_going = true;
  const AuditResult result = RunAudit({folder.path().string()}, options);
  CheckReadInside(check, result.checkpoint, canonical);
  CheckIndexAccounted(check, result.checkpoint, indexes);
  CheckBundleErrors(check, result);
  options.keep_going = false;
  CheckStrictAgrees(check, result, RunAudit({folder.path().string()}, options));
  std::vector<std::string> paths;
  for (const CheckpointFile& file : result.checkpoint.files) paths.push_back(file.path);
  CheckVerdicts(check, result, MappedFiles(std::move(paths)));
}

bool IsBundle(std::span<const uint8_t> bytes) {
  return bytes.size() >= kBundleMagic.size() && std::memcmp(bytes.data(), kBundleMagic.data(), kBundleMagic.size()) == 0;
}

// Its checks on either form of input; the target keeps no state (`fresh` changes nothing).
std::optional<std::vector<Finding>> CheckInput(std::span<const uint8_t> bytes, bool /*fresh*/) {
  Checks check;
  if (IsBundle(bytes)) {
    const std::optional<std::vector<BundleFile>> files = DecodeBundle(bytes);
    if (!files) return std::nullopt;
    CheckBundle(check, *files);
  } else {
    CheckSingleFile(check, bytes);
  }
  return check.findings();
}

}  // namespace

MXDIFF_FUZZ_TARGET(fuzz_safetensors) {
  return mxdiff::fuzz::FuzzTarget{
      .name = kTarget,
      .options = {.kind = "cpu", .max_len = 16384, .dictionary = "safetensors.dict"},
      .format = "safetensors",
      .decode = [](std::span<const uint8_t> bytes) {
        return !IsBundle(bytes) || DecodeBundle(bytes).has_value() ? absl::OkStatus()
                                                                   : absl::InvalidArgumentError("not a valid bundle");
      },
      .describe = [](std::span<const uint8_t> bytes) {
        const std::optional<std::vector<BundleFile>> files = IsBundle(bytes) ? DecodeBundle(bytes) : std::nullopt;
        return files ? fmt::format("a bundle of {} files", files->size()) : fmt::format("a file of {} bytes", bytes.size());
      },
      .check_names = {std::begin(kInvariants), std::end(kInvariants)},
      .check = CheckInput,
      .seed_writer = "committed",
  };
}
