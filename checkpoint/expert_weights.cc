#include "checkpoint/expert_weights.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <set>

#include "absl/status/status.h"
#include "checkpoint/audit_error.h"
#include "checkpoint/strict_json.h"
#include "fmt/core.h"
#include "reference/problem.h"
#include "reference/status_macros.h"

namespace mxdiff::checkpoint {
namespace {

using checkpoint::Checkpoint;
using checkpoint::Dtype;
using checkpoint::TensorInfo;
using checkpoint::TensorRef;

// One projection of one expert: `{stem}.weight` [rows, K/2] packed codes and `{stem}.scale`
// [rows, K/32] raw E8M0 bytes.
struct Projection {
  std::string stem;
  TensorRef weight;
  TensorRef scale;
  uint64_t rows = 0;
  uint64_t k = 0;
};

std::string InputsOf(const Checkpoint& checkpoint) {
  std::string text;
  for (const std::string& input : checkpoint.inputs) text += (text.empty() ? "" : ", ") + input;
  return text;
}

absl::Status Missing(const Checkpoint& checkpoint, const std::string& tensor, std::string_view why) {
  return absl::InvalidArgumentError(
      fmt::format("{}: tensor {} is missing ({})", InputsOf(checkpoint), checkpoint::Quoted(tensor), why));
}

bool IsPackedCodes(Dtype dtype) { return dtype == Dtype::kU8 || dtype == Dtype::kI8; }

absl::StatusOr<Projection> FindProjection(const Checkpoint& checkpoint, const std::string& stem, std::string_view why) {
  Projection p;
  p.stem = stem;
  const std::string weight_name = stem + ".weight", scale_name = stem + ".scale";
  const TensorInfo* weight = checkpoint.Find(weight_name, &p.weight);
  if (weight == nullptr) return Missing(checkpoint, weight_name, why);
  const std::string& file = checkpoint.files[p.weight.file].path;
  if (!IsPackedCodes(weight->dtype) || weight->shape.size() != 2) {
    return checkpoint::TensorError(file, weight_name,
                              fmt::format("is {} {}, not packed MXFP4 codes (U8 or I8, [rows, K/2])",
                                          checkpoint::DtypeName(weight->dtype), checkpoint::FormatShape(weight->shape)));
  }
  const TensorInfo* scale = checkpoint.Find(scale_name, &p.scale);
  if (scale == nullptr) return Missing(checkpoint, scale_name, why);
  p.rows = weight->shape[0];
  p.k = weight->shape[1] * 2;
  const std::vector<uint64_t> expected = {p.rows, p.k / kBlockK};
  if ((scale->dtype != Dtype::kF8E8M0 && scale->dtype != Dtype::kU8) || p.k % kBlockK != 0 ||
      scale->shape != expected) {
    return checkpoint::TensorError(
        checkpoint.files[p.scale.file].path, scale_name,
        fmt::format("{} {} does not match its weight {} {} (expected F8_E8M0 or U8 {}: one byte per 32 codes)",
                    checkpoint::DtypeName(scale->dtype), checkpoint::FormatShape(scale->shape), checkpoint::Quoted(weight_name),
                    checkpoint::FormatShape(weight->shape), checkpoint::FormatShape(expected)));
  }
  return p;
}

absl::Status CheckShape(const Checkpoint& checkpoint, const Projection& p, uint64_t rows, uint64_t k,
                        std::string_view against) {
  if (p.rows == rows && p.k == k) return absl::OkStatus();
  const std::string name = p.stem + ".weight";
  return checkpoint::TensorError(checkpoint.files[p.weight.file].path, name,
                            fmt::format("holds {} rows of K = {}, but {} has {} rows of K = {}", p.rows, p.k,
                                        against, rows, k));
}

// Bytes [first, first + count) of every row of a 2-D tensor of `row_bytes` per row, appended.
absl::Status AppendSlice(const Checkpoint& checkpoint, const checkpoint::ByteSource& source, TensorRef ref,
                         uint64_t row_bytes, uint64_t row_begin, uint64_t row_end, uint64_t first, uint64_t count,
                         std::vector<uint8_t>& out, std::vector<uint8_t>& buffer) {
  const TensorInfo& tensor = checkpoint.tensor(ref);
  const uint64_t data_start = checkpoint.files[ref.file].header.data_start;
  const uint64_t offset = data_start + tensor.begin + row_begin * row_bytes;
  absl::StatusOr<std::span<const uint8_t>> bytes =
      source.Read(ref.file, offset, (row_end - row_begin) * row_bytes, buffer);
  if (!bytes.ok()) return checkpoint::TensorError(checkpoint.files[ref.file].path, tensor.name, std::string(bytes.status().message()));
  for (uint64_t row = 0; row < row_end - row_begin; ++row) {
    const auto begin = bytes->begin() + std::ptrdiff_t(row * row_bytes + first);
    out.insert(out.end(), begin, begin + std::ptrdiff_t(count));
  }
  return absl::OkStatus();
}

struct Expert {
  Projection w1, w2, w3;
};

absl::StatusOr<Expert> FindExpert(const Checkpoint& checkpoint, const std::string& prefix, std::string_view what) {
  const std::string why = fmt::format("{} needs w1, w2 and w3, each with its scale", what);
  absl::StatusOr<Projection> w1 = FindProjection(checkpoint, prefix + ".w1", why);
  if (!w1.ok()) return w1.status();
  absl::StatusOr<Projection> w2 = FindProjection(checkpoint, prefix + ".w2", why);
  if (!w2.ok()) return w2.status();
  absl::StatusOr<Projection> w3 = FindProjection(checkpoint, prefix + ".w3", why);
  if (!w3.ok()) return w3.status();
  // w1 and w3 [I, H/2], w2 [H, I/2].
  MXDIFF_RETURN_IF_ERROR(CheckShape(checkpoint, *w3, w1->rows, w1->k, checkpoint::Quoted(w1->stem + ".weight")));
  MXDIFF_RETURN_IF_ERROR(CheckShape(checkpoint, *w2, w1->k, w1->rows,
                                    fmt::format("{} transposed", checkpoint::Quoted(w1->stem + ".weight"))));
  return Expert{*w1, *w2, *w3};
}

// Appends one expert's W13 (w1 then w3 rows of this rank) and W2 (this rank's K columns).
absl::Status AppendExpert(const Checkpoint& checkpoint, const checkpoint::ByteSource& source, const Expert& expert,
                          const MoeLayerWeights& w, std::vector<uint8_t>& buffer, MoeLayerWeights& out) {
  const uint64_t hidden = uint64_t(w.hidden), slice = uint64_t(w.intermediate);
  const uint64_t row_begin = uint64_t(w.parallel.rank) * slice, row_end = row_begin + slice;
  for (const Projection* p : {&expert.w1, &expert.w3}) {
    MXDIFF_RETURN_IF_ERROR(AppendSlice(checkpoint, source, p->weight, hidden / 2, row_begin, row_end, 0, hidden / 2,
                                       out.w13_codes, buffer));
    MXDIFF_RETURN_IF_ERROR(AppendSlice(checkpoint, source, p->scale, hidden / kBlockK, row_begin, row_end, 0,
                                       hidden / kBlockK, out.w13_scales, buffer));
  }
  const uint64_t full = uint64_t(w.full_intermediate);
  MXDIFF_RETURN_IF_ERROR(AppendSlice(checkpoint, source, expert.w2.weight, full / 2, 0, hidden, row_begin / 2,
                                     slice / 2, out.w2_codes, buffer));
  return AppendSlice(checkpoint, source, expert.w2.scale, full / kBlockK, 0, hidden, row_begin / kBlockK,
                     slice / kBlockK, out.w2_scales, buffer);
}

// The routed expert numbers of `layer` (any tensor named `{layer}.ffn.experts.{e}.`), ascending.
std::set<int> ExpertNumbers(const Checkpoint& checkpoint, std::string_view layer) {
  const std::string head = std::string(layer) + ".ffn.experts.";
  std::set<int> numbers;
  for (const auto& [name, ref] : checkpoint.by_name) {
    if (!name.starts_with(head)) continue;
    const std::string_view rest = std::string_view(name).substr(head.size());
    int e = -1;
    const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), e);
    if (ec == std::errc() && end != rest.data() + rest.size() && *end == '.' && e >= 0) numbers.insert(e);
  }
  return numbers;
}

}  // namespace

std::vector<std::string> MoeLayersOf(const Checkpoint& checkpoint) {
  std::set<std::string> layers;
  constexpr std::string_view kExperts = ".ffn.experts.";
  for (const auto& [name, ref] : checkpoint.by_name) {
    const size_t at = name.find(kExperts);
    if (at != std::string::npos && name.ends_with(".w1.weight")) layers.insert(name.substr(0, at));
  }
  return {layers.begin(), layers.end()};
}

namespace {

absl::Status CheckTensorParallel(TensorParallel parallel) {
  if (parallel.tp < 1) return absl::InvalidArgumentError(fmt::format("tp={}: must be at least 1", parallel.tp));
  if (parallel.rank < 0 || parallel.rank >= parallel.tp) {
    return absl::InvalidArgumentError(
        fmt::format("rank={} is out of range for tp={} (0..{})", parallel.rank, parallel.tp, parallel.tp - 1));
  }
  return absl::OkStatus();
}

// Why `layer` has no routed expert: it holds gpt-oss experts, or it is no MoE layer (with the
// checkpoint's MoE layers).
absl::Status NoRoutedExpertError(const Checkpoint& checkpoint, std::string_view layer) {
  for (const auto& [name, ref] : checkpoint.by_name) {
    if (name.starts_with(std::string(layer) + ".") && name.ends_with("gate_up_proj_blocks")) {
      return absl::UnimplementedError(
          fmt::format("{}: {} holds gpt-oss experts ({}): not loaded (its gate_up rows interleave gate and up, and its "
                      "activation and biases are not the MoE layer's)",
                      checkpoint.files[ref.file].path, checkpoint::Quoted(layer), checkpoint::Quoted(name)));
    }
  }
  std::string known;
  for (const std::string& l : MoeLayersOf(checkpoint)) known += (known.empty() ? "" : ", ") + l;
  return absl::NotFoundError(
      fmt::format("{}: layer {} has no routed expert ({}.ffn.experts.{{e}}.w1.weight); MoE "
                  "layers in the checkpoint: {}",
                  InputsOf(checkpoint), checkpoint::Quoted(layer), layer, known.empty() ? "none" : known));
}

// Routed experts 0 .. count - 1 of `layer`, every one of expert 0's shape.
absl::StatusOr<std::vector<Expert>> FindRoutedExperts(const Checkpoint& checkpoint, std::string_view layer, int count) {
  std::vector<Expert> experts;
  for (int e = 0; e < count; ++e) {
    const std::string prefix = fmt::format("{}.ffn.experts.{}", layer, e);
    absl::StatusOr<Expert> expert =
        FindExpert(checkpoint, prefix, fmt::format("routed expert {} of {} (experts 0..{})", e, layer, count - 1));
    if (!expert.ok()) return expert.status();
    if (!experts.empty()) {
      const Projection& first = experts.front().w1;
      MXDIFF_RETURN_IF_ERROR(CheckShape(checkpoint, expert->w1, first.rows, first.k,
                                        checkpoint::Quoted(first.stem + ".weight")));
    }
    experts.push_back(*std::move(expert));
  }
  return experts;
}

// The layer's sizes from the routed experts' w1, the intermediate size cut by tp.
absl::Status SetLayerSizes(std::string_view layer, const Projection& w1, TensorParallel parallel, MoeLayerWeights& w) {
  w.hidden = int(w1.k);
  w.full_intermediate = int(w1.rows);
  const std::string where = fmt::format("{} (rows of {})", checkpoint::Quoted(layer), checkpoint::Quoted(w1.stem + ".weight"));
  if (w.full_intermediate % parallel.tp != 0) {
    return absl::InvalidArgumentError(fmt::format("tp={} does not divide the intermediate size {} of layer {}",
                                                  parallel.tp, w.full_intermediate, where));
  }
  w.intermediate = w.full_intermediate / parallel.tp;
  if (w.intermediate % kBlockK != 0) {
    return absl::InvalidArgumentError(fmt::format(
        "tp={}: each rank's W2 K slice ({} / {} = {}) of layer {} is not a multiple of the 32-element scale block",
        parallel.tp, w.full_intermediate, parallel.tp, w.intermediate, where));
  }
  return absl::OkStatus();
}

// The shared expert, when the checkpoint has one in MXFP4 of the routed experts' shape (w1);
// one in another dtype is left out with w.shared_note saying why.
absl::StatusOr<std::optional<Expert>> FindSharedExpert(const Checkpoint& checkpoint, std::string_view layer,
                                                       const Projection& w1, MoeLayerWeights& w) {
  const std::string shared_prefix = std::string(layer) + ".ffn.shared_experts";
  if (checkpoint.Find(shared_prefix + ".w1.weight") == nullptr && !checkpoint.Find(shared_prefix + ".w2.weight") &&
      !checkpoint.Find(shared_prefix + ".w3.weight")) {
    return std::nullopt;
  }
  TensorRef ref;
  const TensorInfo* s1 = checkpoint.Find(shared_prefix + ".w1.weight", &ref);
  if (s1 != nullptr && !IsPackedCodes(s1->dtype)) {
    w.shared_note = fmt::format("{}: {} is {}, not packed MXFP4 codes: the shared expert is not loaded",
                                checkpoint.files[ref.file].path, checkpoint::Quoted(s1->name), checkpoint::DtypeName(s1->dtype));
    return std::nullopt;
  }
  absl::StatusOr<Expert> expert = FindExpert(checkpoint, shared_prefix, fmt::format("the shared expert of {}", layer));
  if (!expert.ok()) return expert.status();
  MXDIFF_RETURN_IF_ERROR(CheckShape(checkpoint, expert->w1, w1.rows, w1.k, checkpoint::Quoted(w1.stem + ".weight")));
  w.shared_expert = true;
  return *std::move(expert);
}

// Reads every expert's codes and scales (this rank's slice) into w, in order.
absl::Status AppendExperts(const Checkpoint& checkpoint, const checkpoint::ByteSource& source,
                           const std::vector<Expert>& experts, MoeLayerWeights& w) {
  const size_t groups = size_t(w.groups()), hidden = size_t(w.hidden), inter = size_t(w.intermediate);
  w.w13_codes.reserve(groups * 2 * inter * hidden / 2);
  w.w13_scales.reserve(groups * 2 * inter * hidden / kBlockK);
  w.w2_codes.reserve(groups * hidden * inter / 2);
  w.w2_scales.reserve(groups * hidden * inter / kBlockK);
  std::vector<uint8_t> buffer;
  for (const Expert& expert : experts) {
    MXDIFF_RETURN_IF_ERROR(AppendExpert(checkpoint, source, expert, w, buffer, w));
  }
  return absl::OkStatus();
}

// Everything LoadMoeLayerWeights checks before it reads a byte: the layer's sizes in `w` and the
// experts to read, shared expert last.
absl::StatusOr<std::vector<Expert>> PlanMoeLayer(const Checkpoint& checkpoint, std::string_view layer,
                                                 TensorParallel parallel, MoeLayerWeights& w) {
  MXDIFF_RETURN_IF_ERROR(CheckTensorParallel(parallel));
  const std::set<int> numbers = ExpertNumbers(checkpoint, layer);
  if (numbers.empty()) return NoRoutedExpertError(checkpoint, layer);
  w.layer = std::string(layer);
  w.parallel = parallel;
  w.experts = *numbers.rbegin() + 1;
  if (w.experts > kMaxMoeExperts) {
    return absl::InvalidArgumentError(fmt::format("{}: layer {} has expert {}: at most {} experts",
                                                  InputsOf(checkpoint), checkpoint::Quoted(layer), w.experts - 1,
                                                  kMaxMoeExperts));
  }
  absl::StatusOr<std::vector<Expert>> experts = FindRoutedExperts(checkpoint, layer, w.experts);
  if (!experts.ok()) return experts.status();
  const Projection& w1 = experts->front().w1;
  MXDIFF_RETURN_IF_ERROR(SetLayerSizes(layer, w1, parallel, w));
  absl::StatusOr<std::optional<Expert>> shared = FindSharedExpert(checkpoint, layer, w1, w);
  if (!shared.ok()) return shared.status();
  if (*shared) experts->push_back(**std::move(shared));
  return experts;
}

}  // namespace

absl::Status CheckMoeLayerWeights(const Checkpoint& checkpoint, std::string_view layer, TensorParallel parallel) {
  MoeLayerWeights w;
  return PlanMoeLayer(checkpoint, layer, parallel, w).status();
}

absl::StatusOr<MoeLayerWeights> LoadMoeLayerWeights(const Checkpoint& checkpoint, const checkpoint::ByteSource& source,
                                                    std::string_view layer, TensorParallel parallel) {
  MoeLayerWeights w;
  absl::StatusOr<std::vector<Expert>> experts = PlanMoeLayer(checkpoint, layer, parallel, w);
  if (!experts.ok()) return experts.status();
  MXDIFF_RETURN_IF_ERROR(AppendExperts(checkpoint, source, *experts, w));
  return w;
}

absl::StatusOr<MoeLayerWeights> LoadMoeLayerWeights(const std::vector<std::string>& paths, std::string_view layer,
                                                    TensorParallel parallel) {
  const Checkpoint checkpoint = checkpoint::LoadCheckpoint(paths, /*keep_going=*/false);
  if (!checkpoint.errors.empty()) return absl::InvalidArgumentError(checkpoint.errors.front().message);
  std::vector<std::string> files;
  for (const checkpoint::CheckpointFile& file : checkpoint.files) files.push_back(file.path);
  const checkpoint::MappedFiles source(std::move(files));
  return LoadMoeLayerWeights(checkpoint, source, layer, parallel);
}

}  // namespace mxdiff::checkpoint
