#include "fuzz/formats/layer_case_format.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "fuzz/formats/byte_cursor.h"
#include "fuzz/formats/case_format.h"
#include "reference/admission.h"

namespace mxdiff::fuzz {
namespace {

template <typename Cursor>
absl::Status VisitTactic(Cursor& io, const std::string& prefix, Tactic& t) {
  // The GEMM case format's tactic bounds (fuzz/formats/case_format.h), so both formats take the same tactics.
  MXDIFF_RETURN_IF_ERROR(io.Int(prefix + ".cta_m", 2, 1, kMaxTileSize, t.cta_m));
  MXDIFF_RETURN_IF_ERROR(io.Int(prefix + ".cta_n", 2, 1, kMaxTileSize, t.cta_n));
  MXDIFF_RETURN_IF_ERROR(io.Int(prefix + ".cta_k", 2, 4, kMaxCtaK, t.cta_k));
  if (t.cta_k % 4 != 0) return absl::InvalidArgumentError(fmt::format("{}.cta_k = {} is not a multiple of 4", prefix, t.cta_k));
  MXDIFF_RETURN_IF_ERROR(io.Int(prefix + ".splits", 2, 1, kMaxSplits, t.splits));
  return io.Int(prefix + ".swizzle", 1, 0, kMaxSwizzle, t.swizzle);
}

template <typename Enum, typename Cursor>
absl::Status VisitEnum(Cursor& io, const char* field, int count, Enum& value) {
  int raw = int(value);
  MXDIFF_RETURN_IF_ERROR(io.Int(field, 1, 0, count - 1, raw));
  value = Enum(raw);
  return absl::OkStatus();
}

template <typename Cursor>
absl::Status VisitMultiple(Cursor& io, const char* field, int maximum, int& value) {
  MXDIFF_RETURN_IF_ERROR(io.Int(field, 2, kBlockK, maximum, value));
  if (value % kBlockK != 0) return absl::InvalidArgumentError(fmt::format("{} = {} is not a multiple of 32", field, value));
  return absl::OkStatus();
}

// The one field list of layer case version 1 (fuzz/README.md mirrors it).
template <typename Cursor>
absl::Status VisitLayerCase(Cursor& io, LayerCase& c) {
  for (int i = 0; i < 4; ++i) {
    int magic = kLayerCaseMagic[i];
    MXDIFF_RETURN_IF_ERROR(io.Int("magic", 1, kLayerCaseMagic[i], kLayerCaseMagic[i], magic));
  }
  int version = kLayerCaseVersion;
  MXDIFF_RETURN_IF_ERROR(io.Int("version", 1, kLayerCaseVersion, kLayerCaseVersion, version));
  MXDIFF_RETURN_IF_ERROR(VisitMultiple(io, "hidden", kLayerMaxHidden, c.shape.hidden));
  MXDIFF_RETURN_IF_ERROR(VisitMultiple(io, "intermediate", kLayerMaxIntermediate, c.shape.intermediate));
  MXDIFF_RETURN_IF_ERROR(io.Int("experts", 1, 1, kLayerMaxExperts, c.shape.experts));
  MXDIFF_RETURN_IF_ERROR(io.Int("top_k", 1, 1, kLayerMaxTopK, c.shape.top_k));
  int shared = c.shape.shared_expert ? 1 : 0;
  MXDIFF_RETURN_IF_ERROR(io.Int("shared_expert", 1, 0, 1, shared));
  c.shape.shared_expert = shared == 1;
  MXDIFF_RETURN_IF_ERROR(io.Int("max_tokens", 1, 1, kLayerMaxTokens, c.max_tokens));
  MXDIFF_RETURN_IF_ERROR(io.Int("w13_capacity", 1, 0, kLayerMaxCapacity, c.w13_capacity));
  MXDIFF_RETURN_IF_ERROR(io.Int("w2_capacity", 1, 0, kLayerMaxCapacity, c.w2_capacity));
  MXDIFF_RETURN_IF_ERROR(VisitEnum(io, "request", 3, c.request));
  MXDIFF_RETURN_IF_ERROR(VisitEnum(io, "policy", 2, c.policy));
  MXDIFF_RETURN_IF_ERROR(VisitTactic(io, "w13_tactic", c.w13_tactic));
  MXDIFF_RETURN_IF_ERROR(VisitTactic(io, "w2_tactic", c.w2_tactic));
  static_assert(std::endian::native == std::endian::little, "payloads are copied as little-endian");
  MXDIFF_RETURN_IF_ERROR(io.Array("w13_codes", c.w13_codes, c.w13_codes_size()));
  MXDIFF_RETURN_IF_ERROR(io.Array("w13_scales", c.w13_scales, c.w13_scales_size()));
  MXDIFF_RETURN_IF_ERROR(io.Array("w2_codes", c.w2_codes, c.w2_codes_size()));
  MXDIFF_RETURN_IF_ERROR(io.Array("w2_scales", c.w2_scales, c.w2_scales_size()));
  int replays = int(c.replays.size());
  MXDIFF_RETURN_IF_ERROR(io.Int("replays", 1, 1, kLayerMaxReplays, replays));
  if constexpr (Cursor::kDecoding) c.replays.resize(size_t(replays));
  for (size_t r = 0; r < c.replays.size(); ++r) {
    LayerReplay& replay = c.replays[r];
    const std::string at = fmt::format("replay {} ", r);
    int flags = (replay.new_w13_scales ? 1 : 0) | (replay.new_w2_scales ? 2 : 0);
    MXDIFF_RETURN_IF_ERROR(io.Int(at + "flags", 1, 0, 3, flags));
    replay.new_w13_scales = (flags & 1) != 0;
    replay.new_w2_scales = (flags & 2) != 0;
    if (replay.new_w13_scales) MXDIFF_RETURN_IF_ERROR(io.Array(at + "w13_scales", replay.w13_scales, c.w13_scales_size()));
    if (replay.new_w2_scales) MXDIFF_RETURN_IF_ERROR(io.Array(at + "w2_scales", replay.w2_scales, c.w2_scales_size()));
    MXDIFF_RETURN_IF_ERROR(io.Int(at + "tokens", 1, 0, c.max_tokens, replay.tokens));
    const size_t entries = size_t(replay.tokens) * size_t(c.shape.top_k);
    if constexpr (Cursor::kDecoding) replay.expert_ids.resize(entries);
    if (replay.expert_ids.size() != entries) {
      return absl::InvalidArgumentError(fmt::format("{}expert_ids has {} entries, {} needed", at, replay.expert_ids.size(), entries));
    }
    for (size_t i = 0; i < entries; ++i) {
      int id = replay.expert_ids[i];
      MXDIFF_RETURN_IF_ERROR(io.Int(at + "expert id", 1, 0, 255, id));
      replay.expert_ids[i] = id;
    }
    MXDIFF_RETURN_IF_ERROR(io.Array(at + "weights", replay.weights, entries));
    MXDIFF_RETURN_IF_ERROR(io.Array(at + "activations", replay.activations, size_t(replay.tokens) * c.shape.hidden));
  }
  return absl::OkStatus();
}

size_t PerExpert(const MoeShape& s, int n, int k, int divisor) { return size_t(s.groups()) * n * k / divisor; }

}  // namespace

bool operator==(const LayerReplay& a, const LayerReplay& b) {
  return a.new_w13_scales == b.new_w13_scales && a.new_w2_scales == b.new_w2_scales && a.w13_scales == b.w13_scales &&
         a.w2_scales == b.w2_scales && a.tokens == b.tokens && a.expert_ids == b.expert_ids &&
         a.activations == b.activations && a.weights.size() == b.weights.size() &&
         std::memcmp(a.weights.data(), b.weights.data(), a.weights.size() * sizeof(float)) == 0;
}

size_t LayerCase::w13_codes_size() const { return PerExpert(shape, shape.w13_n(), shape.hidden, 2); }
size_t LayerCase::w13_scales_size() const { return PerExpert(shape, shape.w13_n(), shape.hidden, kBlockK); }
size_t LayerCase::w2_codes_size() const { return PerExpert(shape, shape.hidden, shape.intermediate, 2); }
size_t LayerCase::w2_scales_size() const { return PerExpert(shape, shape.hidden, shape.intermediate, kBlockK); }

void ResizeLayerReplay(const LayerCase& c, LayerReplay& r) {
  r.tokens = std::min(r.tokens, c.max_tokens);
  const size_t entries = size_t(r.tokens) * size_t(c.shape.top_k);
  r.expert_ids.resize(entries, 0);
  r.weights.resize(entries, 1.0f);
  r.activations.resize(size_t(r.tokens) * c.shape.hidden, 0x3C00);
  r.w13_scales.resize(r.new_w13_scales ? c.w13_scales_size() : 0, 127);
  r.w2_scales.resize(r.new_w2_scales ? c.w2_scales_size() : 0, 127);
}

void ResizeLayerCase(LayerCase& c) {
  c.w13_codes.resize(c.w13_codes_size(), 0);
  c.w13_scales.resize(c.w13_scales_size(), 127);
  c.w2_codes.resize(c.w2_codes_size(), 0);
  c.w2_scales.resize(c.w2_scales_size(), 127);
  for (LayerReplay& r : c.replays) ResizeLayerReplay(c, r);
}

absl::Status ValidateLayerCase(const LayerCase& c) {
  std::vector<uint8_t> scratch;
  ByteWriter writer(scratch);
  return VisitLayerCase(writer, const_cast<LayerCase&>(c));  // the writer only reads
}

absl::StatusOr<LayerCase> DecodeLayerCase(std::span<const uint8_t> bytes) {
  LayerCase c;
  c.replays.clear();
  ByteReader reader(bytes, "layer case");
  MXDIFF_RETURN_IF_ERROR(VisitLayerCase(reader, c));
  if (reader.offset() != reader.size()) {
    return absl::InvalidArgumentError(fmt::format("{} trailing bytes after the layer case ({} bytes expected)",
                                                  reader.size() - reader.offset(), reader.offset()));
  }
  return c;
}

absl::StatusOr<std::vector<uint8_t>> EncodeLayerCase(const LayerCase& c) {
  std::vector<uint8_t> bytes;
  ByteWriter writer(bytes);
  MXDIFF_RETURN_IF_ERROR(VisitLayerCase(writer, const_cast<LayerCase&>(c)));
  return bytes;
}

std::span<const uint8_t> LayerScalesAt(const LayerCase& c, MoeGemm gemm, int replay) {
  const bool w13 = gemm == MoeGemm::kW13;
  std::span<const uint8_t> scales = w13 ? c.w13_scales : c.w2_scales;
  for (int r = 0; r <= replay && r < int(c.replays.size()); ++r) {
    const LayerReplay& x = c.replays[size_t(r)];
    if (w13 && x.new_w13_scales) scales = x.w13_scales;
    if (!w13 && x.new_w2_scales) scales = x.w2_scales;
  }
  return scales;
}

std::string DescribeLayerCase(const LayerCase& c) {
  std::string text = fmt::format(
      "layer case v{}: hidden {}, intermediate {}, {} experts, top-{}{}, max_tokens {}, capacity W13 {} W2 {} "
      "(0: worst)\n  request {}, policy {}, tactics W13 {} W2 {}\n  W13 scales: {}\n  W2 scales: {}\n",
      kLayerCaseVersion, c.shape.hidden, c.shape.intermediate, c.shape.experts, c.shape.top_k,
      c.shape.shared_expert ? " + shared" : "", c.max_tokens, c.w13_capacity, c.w2_capacity,
      TransformRequestName(c.request), FallbackPolicyName(c.policy), TacticName(c.w13_tactic), TacticName(c.w2_tactic),
      AdmitLayer(c.w13_scales).Describe(), AdmitLayer(c.w2_scales).Describe());
  for (size_t r = 0; r < c.replays.size(); ++r) {
    const LayerReplay& x = c.replays[r];
    text += fmt::format("  replay {}: {} tokens, ids", r, x.tokens);
    for (int32_t id : x.expert_ids) text += fmt::format(" {}", id);
    if (x.new_w13_scales) text += fmt::format("; new W13 scales ({})", AdmitLayer(x.w13_scales).Describe());
    if (x.new_w2_scales) text += fmt::format("; new W2 scales ({})", AdmitLayer(x.w2_scales).Describe());
    text += "\n";
  }
  return text;
}

}  // namespace mxdiff::fuzz
