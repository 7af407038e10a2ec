#include "checkpoint/scale_plan.h"

#include <algorithm>
#include <array>
#include <climits>
#include <map>
#include <regex>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "fmt/core.h"
#include "checkpoint/strict_json.h"

namespace mxdiff::checkpoint {
namespace {

constexpr std::string_view kScaleSuffix = ".scale";     // DeepSeek V4: beside ".weight"
constexpr std::string_view kScalesSuffix = "_scales";   // gpt-oss: beside "_blocks"
constexpr size_t kMaxPatternNameLength = 4096;          // std::regex recurses per character

// What a scale tensor's name says about its role.
struct Role {
  LayerKind kind = LayerKind::kSingle;
  std::string layer;    // the kernel layer's name
  int expert = -1;      // routed experts
  int projection = 0;   // 1, 2 or 3 (w1, w2, w3) for DeepSeek experts
  std::string weight;   // the weight's name by the convention, "" if none applies
};

bool AtComponentStart(std::string_view text, size_t pos) { return pos == 0 || text[pos - 1] == '.'; }

// "17" -> 17; no sign, no leading zero (so one expert has one spelling), at most 9 digits.
std::optional<int> ParseIndex(std::string_view digits) {
  if (digits.empty() || digits.size() > 9 || (digits.size() > 1 && digits[0] == '0')) return std::nullopt;
  int value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

// "w1" -> 1 for w1, w2, w3.
int Projection(std::string_view text) {
  return text.size() == 2 && text[0] == 'w' && text[1] >= '1' && text[1] <= '3' ? text[1] - '0' : 0;
}

std::string_view W13OrW2(int projection) { return projection == 2 ? "W2" : "W13"; }

Role RoleOf(std::string_view name) {
  Role role;
  role.layer = std::string(name);
  if (name.ends_with(kScaleSuffix)) {
    const std::string_view stem = name.substr(0, name.size() - kScaleSuffix.size());
    role.weight = std::string(stem) + ".weight";
    role.layer = std::string(stem);
    // P.ffn.experts.{e}.w{1,2,3}
    constexpr std::string_view kRouted = "ffn.experts.";
    if (const size_t at = stem.rfind(kRouted); at != std::string_view::npos && AtComponentStart(stem, at)) {
      const std::string_view rest = stem.substr(at + kRouted.size());
      const size_t dot = rest.find('.');
      if (dot != std::string_view::npos) {
        const std::optional<int> expert = ParseIndex(rest.substr(0, dot));
        const int projection = Projection(rest.substr(dot + 1));
        if (expert && projection) {
          role.kind = projection == 2 ? LayerKind::kRoutedW2 : LayerKind::kRoutedW13;
          role.expert = *expert;
          role.projection = projection;
          role.layer = fmt::format("{}{}{}", stem.substr(0, at), kRouted, W13OrW2(projection));
          return role;
        }
      }
    }
    // P.ffn.shared_experts.w{1,2,3}
    constexpr std::string_view kShared = "ffn.shared_experts.";
    if (const size_t at = stem.rfind(kShared); at != std::string_view::npos && AtComponentStart(stem, at)) {
      const int projection = Projection(stem.substr(at + kShared.size()));
      if (projection) {
        role.kind = projection == 2 ? LayerKind::kSharedW2 : LayerKind::kSharedW13;
        role.projection = projection;
        role.layer = fmt::format("{}{}{}", stem.substr(0, at), kShared, W13OrW2(projection));
        return role;
      }
    }
    return role;
  }
  if (name.ends_with(kScalesSuffix)) {
    const std::string_view stem = name.substr(0, name.size() - kScalesSuffix.size());
    role.weight = std::string(stem) + "_blocks";
    role.layer = std::string(stem);
    for (const auto& [projection, kind, short_name] :
         {std::tuple{std::string_view("gate_up_proj"), LayerKind::kFusedW13, std::string_view("W13")},
          std::tuple{std::string_view("down_proj"), LayerKind::kFusedW2, std::string_view("W2")}}) {
      if (stem.ends_with(projection) && AtComponentStart(stem, stem.size() - projection.size())) {
        role.kind = kind;
        role.layer = fmt::format("{}{}", stem.substr(0, stem.size() - projection.size()), short_name);
      }
    }
  }
  return role;
}

// The default selection (without --pattern).
bool SelectedByDefault(const Checkpoint& checkpoint, const TensorInfo& tensor) {
  if (tensor.dtype == Dtype::kF8E8M0) return true;
  if (tensor.dtype != Dtype::kU8) return false;
  const Role role = RoleOf(tensor.name);
  return !role.weight.empty() && checkpoint.Find(role.weight) != nullptr;
}

struct Geometry {
  uint64_t groups = 0;
  uint64_t n = 0;
  uint64_t k = 0;
};

// The kernel operand a scale tensor describes, by its role: DeepSeek experts [N, K/32], fused
// experts [E, N, K/32], any other [..., N, K/32] (leading dims are groups).
std::optional<Geometry> GeometryOf(LayerKind kind, const TensorInfo& scale, std::string* why) {
  const std::vector<uint64_t>& shape = scale.shape;
  const size_t rank = shape.size();
  const size_t wanted = kind == LayerKind::kFusedW13 || kind == LayerKind::kFusedW2 ? 3
                        : kind == LayerKind::kSingle                                  ? 0
                                                                                      : 2;
  if ((wanted != 0 && rank != wanted) || rank == 0) {
    *why = wanted == 3 ? fmt::format("scale shape {} is not [experts, N, K/32]", FormatShape(shape))
           : wanted == 2 ? fmt::format("scale shape {} is not [N, K/32]", FormatShape(shape))
                         : "a scale tensor of rank 0 scales nothing";
    return std::nullopt;
  }
  for (uint64_t dimension : shape) {
    if (dimension == 0 || dimension > uint64_t(INT_MAX) / 32) {
      *why = fmt::format("scale shape {} gives no kernel layer (a dimension is 0 or too large)", FormatShape(shape));
      return std::nullopt;
    }
  }
  Geometry geometry{1, rank >= 2 ? shape[rank - 2] : 1, 32 * shape[rank - 1]};
  for (size_t i = 0; i + 2 < rank; ++i) {
    if (geometry.groups > uint64_t(INT_MAX) / shape[i]) {
      *why = fmt::format("scale shape {} has more groups than the kernels take", FormatShape(shape));
      return std::nullopt;
    }
    geometry.groups *= shape[i];
  }
  return geometry;
}

struct Member {
  size_t scale;  // into plan.scales
  Role role;
};

struct UnreadMember {
  std::string name;  // into checkpoint.unread
  Role role;
};

struct LayerMembers {
  std::vector<Member> read;
  std::vector<UnreadMember> unread;
};

class LayerBuilder {
 public:
  LayerBuilder(const Checkpoint& checkpoint, AuditPlan& plan) : checkpoint_(checkpoint), plan_(plan) {}

  // `unread`: tensors of the layer (by their names) that an index names but that could not be
  // read; with any, the layer is refused, and kept even when no member was read.
  void Build(const std::string& name, std::vector<Member> members, const std::vector<UnreadMember>& unread) {
    KernelLayer layer;
    layer.name = name;
    layer.kind = members.empty() ? unread.front().role.kind : members.front().role.kind;
    // Whether an unread tensor's weight holds packed codes is not known: the layer is kept.
    if (unread.empty() && !IsMxfp4(members)) return;
    // Kernel byte order: by expert, w1 before w3 (copies of one name stay in file order).
    std::stable_sort(members.begin(), members.end(), [](const Member& a, const Member& b) {
      return std::pair(a.role.expert, a.role.projection) < std::pair(b.role.expert, b.role.projection);
    });
    CheckPartners(layer, members);
    std::optional<Geometry> shape;  // of the first member with one
    uint64_t n_sum_of_group = 0;    // W13: rows of w1 + w3 of one expert
    const ScaleTensor* shape_of = nullptr;  // the member `shape` comes from
    uint64_t groups = 0;
    bool consistent = true;
    for (const Member& member : members) {
      ScaleTensor& scale = plan_.scales[member.scale];
      scale.layer = int(plan_.layers.size());
      scale.layer_offset = layer.scale_bytes;
      const TensorInfo& info = checkpoint_.tensor(scale.ref);
      layer.scale_bytes += info.byte_size();
      layer.members.push_back(member.scale);
      CheckCopies(layer, scale);
      const size_t problems_before = layer.problems.size();
      CheckWeight(layer, scale, info);
      const bool weight_fits = layer.problems.size() == problems_before;
      std::string why;
      const std::optional<Geometry> geometry = GeometryOf(layer.kind, info, &why);
      if (!geometry) {
        layer.problems.push_back({scale.name, why});
        consistent = false;
        continue;
      }
      if (!weight_fits) {  // already refused for it: its geometry is no reference for the others
        consistent = false;
        continue;
      }
      if (!shape) {
        shape = geometry;
        shape_of = &scale;
      }
      if (geometry->k != shape->k || geometry->n != shape->n || geometry->groups != shape->groups) {
        layer.problems.push_back({scale.name, fmt::format("scale shape {} disagrees with {} of the same layer ({})",
                                                          FormatShape(info.shape), shape_of->name,
                                                          FormatShape(checkpoint_.tensor(shape_of->ref).shape))});
        consistent = false;
      }
    }
    for (const UnreadMember& member : unread) {
      const UnreadTensor& why = checkpoint_.unread.at(member.name);
      layer.unread.push_back(member.name);
      layer.problems.push_back({member.name, fmt::format("not read: the index {} names it, but {}: the layer cannot be "
                                                         "judged without it",
                                                         why.index, why.why)});
    }
    if (consistent && shape) {
      const bool w13 = layer.kind == LayerKind::kRoutedW13 || layer.kind == LayerKind::kSharedW13;
      const bool routed = layer.kind == LayerKind::kRoutedW13 || layer.kind == LayerKind::kRoutedW2;
      groups = routed ? (w13 ? members.size() / 2 : members.size()) : shape->groups;
      n_sum_of_group = w13 ? 2 * shape->n : shape->n;
      if (groups > uint64_t(INT_MAX) || n_sum_of_group > uint64_t(INT_MAX)) {
        layer.problems.push_back({"", "the layer is larger than the kernels take"});
      } else if (layer.problems.empty()) {
        layer.groups = int(groups);
        layer.n = int(n_sum_of_group);
        layer.k = int(shape->k);
      }
    }
    plan_.layers.push_back(std::move(layer));
  }

 private:
  // False (and the members noted) when no member's weight holds packed 4-bit codes: an FP8 or
  // BF16 weight's scales are no MXFP4 kernel layer. A convention layer with a weight missing is
  // one (and refused for it); a lone scale without a weight is not.
  bool IsMxfp4(const std::vector<Member>& members) {
    bool all_weights_known = true;
    for (const Member& member : members) {
      const ScaleTensor& scale = plan_.scales[member.scale];
      if (scale.weight && IsPackedFp4(checkpoint_.tensor(*scale.weight).dtype)) return true;
      // A weight that could not be read: unknown, so judged (and refused) as a kernel layer.
      if (!scale.weight_name.empty() && checkpoint_.unread.contains(scale.weight_name)) return true;
      all_weights_known &= scale.weight.has_value();
    }
    if (!all_weights_known && members.front().role.kind != LayerKind::kSingle) return true;
    for (const Member& member : members) {
      ScaleTensor& scale = plan_.scales[member.scale];
      if (!scale.weight) {
        scale.note_kind = scale.weight_name.empty() ? "no weight tensor by a known naming convention"
                                                    : "no weight tensor beside it";
        scale.note = scale.weight_name.empty()
                         ? scale.note_kind
                         : fmt::format("no weight tensor {} beside it", Quoted(scale.weight_name));
      } else {
        const std::string_view dtype = DtypeName(checkpoint_.tensor(*scale.weight).dtype);
        scale.note_kind = fmt::format("weight is {}, not packed MXFP4 codes", dtype);
        scale.note = fmt::format("weight {} is {}, not packed MXFP4 codes", Quoted(scale.weight_name), dtype);
      }
      scale.note += ": not a kernel layer";
    }
    return false;
  }

  void CheckWeight(KernelLayer& layer, const ScaleTensor& scale, const TensorInfo& info) {
    // Unread where the index puts it: a copy found elsewhere is not the tensor the index names.
    if (const auto unread = checkpoint_.unread.find(scale.weight_name);
        !scale.weight_name.empty() && unread != checkpoint_.unread.end()) {
      layer.problems.push_back({scale.name, fmt::format("its weight {} was not read: the index {} names it, but {}",
                                                        Quoted(scale.weight_name), unread->second.index,
                                                        unread->second.why)});
      return;
    }
    if (!scale.weight) {
      layer.problems.push_back({scale.name, scale.weight_name.empty()
                                                ? std::string("no weight tensor by a known naming convention")
                                                : fmt::format("no weight tensor {} beside it", Quoted(scale.weight_name))});
      return;
    }
    const TensorInfo& weight = checkpoint_.tensor(*scale.weight);
    if (checkpoint_.copies.contains(weight.name)) {
      layer.problems.push_back({scale.name, fmt::format("its weight {} is in {} files ({}): a tensor name may occur "
                                                        "once in a checkpoint",
                                                        Quoted(weight.name), checkpoint_.copies.at(weight.name).size(),
                                                        checkpoint_.FilesOf(weight.name))});
    }
    if (!IsPackedFp4(weight.dtype)) {
      layer.problems.push_back({scale.name, fmt::format("weight {} is {}, not packed MXFP4 codes like the rest of the "
                                                        "layer",
                                                        Quoted(weight.name), DtypeName(weight.dtype))});
      return;
    }
    if (std::string mismatch = ShapeMismatch(info, weight); !mismatch.empty()) {
      layer.problems.push_back({scale.name, std::move(mismatch)});
    }
  }

  // A name in several files is one problem (on its first copy); every copy stays a member, so
  // that each copy's bytes are judged and located, whichever was read first.
  void CheckCopies(KernelLayer& layer, const ScaleTensor& scale) {
    const auto copies = checkpoint_.copies.find(scale.name);
    if (copies == checkpoint_.copies.end() || copies->second.front() != scale.ref) return;
    layer.problems.push_back({scale.name, fmt::format("in {} files ({}): a tensor name may occur once in a checkpoint, "
                                                      "and which copy a loader takes is not defined",
                                                      copies->second.size(), checkpoint_.FilesOf(scale.name))});
  }

  // W13 needs w1 and w3 of every expert.
  void CheckPartners(KernelLayer& layer, const std::vector<Member>& members) {
    if (layer.kind != LayerKind::kRoutedW13 && layer.kind != LayerKind::kSharedW13) return;
    std::map<int, std::array<const Member*, 4>> by_expert;
    for (const Member& member : members) by_expert[member.role.expert][member.role.projection] = &member;
    for (const auto& [expert, projections] : by_expert) {
      for (const auto& [have, lack] : {std::pair{1, 3}, std::pair{3, 1}}) {
        if (projections[have] != nullptr && projections[lack] == nullptr) {
          layer.problems.push_back({plan_.scales[projections[have]->scale].name,
                                    fmt::format("it has no w{} partner: W13 needs w1 and w3 of every expert", lack)});
        }
      }
    }
  }

  const Checkpoint& checkpoint_;
  AuditPlan& plan_;
};

}  // namespace

std::string_view LayerKindName(LayerKind kind) {
  switch (kind) {
    case LayerKind::kRoutedW13:
      return "routed-w13";
    case LayerKind::kRoutedW2:
      return "routed-w2";
    case LayerKind::kSharedW13:
      return "shared-w13";
    case LayerKind::kSharedW2:
      return "shared-w2";
    case LayerKind::kFusedW13:
      return "fused-w13";
    case LayerKind::kFusedW2:
      return "fused-w2";
    case LayerKind::kSingle:
      return "single";
  }
  return "unknown";
}

bool IsPackedFp4(Dtype weight_dtype) {
  return weight_dtype == Dtype::kU8 || weight_dtype == Dtype::kI8 || weight_dtype == Dtype::kF4;
}

std::string ShapeMismatch(const TensorInfo& scale, const TensorInfo& weight) {
  const std::vector<uint64_t>& s = scale.shape;
  const std::vector<uint64_t>& w = weight.shape;
  const auto same_prefix = [&](size_t count) { return std::equal(s.begin(), s.begin() + count, w.begin()); };
  if (!s.empty() && !w.empty()) {
    if (weight.dtype == Dtype::kF4) {  // one code per element
      if (w.size() == s.size() && same_prefix(s.size() - 1) && w.back() == 32 * s.back()) return "";
    } else {
      // [..., K/2] codes beside [..., K/32], or gpt-oss blocks [..., K/32, 16] beside [..., K/32].
      if (w.size() == s.size() && same_prefix(s.size() - 1) && s.back() <= UINT64_MAX / 16 && w.back() == 16 * s.back()) {
        return "";
      }
      if (w.size() == s.size() + 1 && same_prefix(s.size()) && w.back() == 16) return "";
    }
  }
  const uint64_t codes_per_row = w.empty() ? 0 : (weight.dtype == Dtype::kF4 ? w.back() : 2 * w.back());
  return fmt::format("scale shape {} disagrees with weight {} {} ({}): K/32 scale bytes per K/2 code bytes along a "
                     "row ({} codes a row need {} scale bytes)",
                     FormatShape(s), Quoted(weight.name), FormatShape(w), DtypeName(weight.dtype), codes_per_row,
                     codes_per_row % 32 == 0 ? fmt::format("{}", codes_per_row / 32) : std::string("a whole number of"));
}

bool NaturalLess(std::string_view a, std::string_view b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const bool digit_a = a[i] >= '0' && a[i] <= '9', digit_b = b[j] >= '0' && b[j] <= '9';
    if (digit_a && digit_b) {
      size_t end_a = i, end_b = j;
      while (end_a < a.size() && a[end_a] >= '0' && a[end_a] <= '9') ++end_a;
      while (end_b < b.size() && b[end_b] >= '0' && b[end_b] <= '9') ++end_b;
      // Without leading zeros the longer run is the larger number.
      std::string_view run_a = a.substr(i, end_a - i), run_b = b.substr(j, end_b - j);
      while (run_a.size() > 1 && run_a[0] == '0') run_a.remove_prefix(1);
      while (run_b.size() > 1 && run_b[0] == '0') run_b.remove_prefix(1);
      if (run_a.size() != run_b.size()) return run_a.size() < run_b.size();
      if (run_a != run_b) return run_a < run_b;
      if (end_a - i != end_b - j) return end_a - i < end_b - j;  // "01" after "1": a total order
      i = end_a;
      j = end_b;
      continue;
    }
    if (a[i] != b[j]) return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[j]);
    ++i;
    ++j;
  }
  return a.size() - i < b.size() - j;
}

namespace {

// --pattern as a regular expression (none without it).
absl::StatusOr<std::optional<std::regex>> CompilePattern(const SelectionOptions& options) {
  std::optional<std::regex> pattern;
  if (options.pattern) {
    try {
      pattern.emplace(*options.pattern, std::regex::ECMAScript);
    } catch (const std::regex_error& error) {
      return absl::InvalidArgumentError(
          fmt::format("--pattern {}: not a regular expression: {}", Quoted(*options.pattern), error.what()));
    }
  }
  return pattern;
}

// Whether tensor t of file f is a scale tensor to audit: matched by the pattern, or else by the
// default selection. A pattern's match that cannot be a scale (or a name too long to match) is
// an error in the plan and not selected.
bool SelectScale(const Checkpoint& checkpoint, const std::optional<std::regex>& pattern, const CheckpointFile& file,
                 const TensorInfo& tensor, AuditPlan& plan) {
  if (!pattern) return SelectedByDefault(checkpoint, tensor);
  if (tensor.name.size() > kMaxPatternNameLength) {
    plan.errors.push_back({file.path, tensor.name,
                           fmt::format("{}: tensor {}: a {}-byte name is too long to match against --pattern",
                                       file.path, Quoted(tensor.name), tensor.name.size())});
    return false;
  }
  const bool selected = std::regex_match(tensor.name, *pattern);
  if (selected && DtypeBits(tensor.dtype) != 8) {
    plan.errors.push_back({file.path, tensor.name,
                           fmt::format("{}: tensor {}: --pattern selects it, but its dtype {} is not one byte a "
                                       "scale",
                                       file.path, Quoted(tensor.name), DtypeName(tensor.dtype))});
    return false;
  }
  return selected;
}

// The selected scale tensors of every file, each with its weight when the checkpoint has it;
// copies of one name (in several files) one after the other, in the order of their files.
void SelectScales(const Checkpoint& checkpoint, const std::optional<std::regex>& pattern, AuditPlan& plan) {
  for (size_t f = 0; f < checkpoint.files.size(); ++f) {
    const CheckpointFile& file = checkpoint.files[f];
    for (size_t t = 0; t < file.header.tensors.size(); ++t) {
      const TensorInfo& tensor = file.header.tensors[t];
      if (!SelectScale(checkpoint, pattern, file, tensor, plan)) continue;
      ScaleTensor scale;
      scale.name = tensor.name;
      scale.ref = TensorRef{f, t};
      scale.weight_name = RoleOf(tensor.name).weight;
      TensorRef weight;
      if (!scale.weight_name.empty() && checkpoint.Find(scale.weight_name, &weight) != nullptr) scale.weight = weight;
      plan.scales.push_back(std::move(scale));
    }
  }
  std::sort(plan.scales.begin(), plan.scales.end(), [](const ScaleTensor& a, const ScaleTensor& b) {
    if (NaturalLess(a.name, b.name)) return true;
    if (NaturalLess(b.name, a.name)) return false;
    return a.ref.file < b.ref.file;
  });
}

// A kernel layer's key: its name, but a lone tensor's layer is keyed by its own name so that no
// two lone tensors merge.
std::string LayerKey(const std::string& name, const Role& role) {
  return role.kind == LayerKind::kSingle ? name + '\0' : role.layer;
}

// The routed layer `P.ffn.experts.W13` (or W2) that `P.ffn.shared_experts.W13` (W2) joins.
std::string RoutedLayerOf(const std::string& shared_layer) {
  constexpr std::string_view kShared = "ffn.shared_experts.";
  const size_t at = shared_layer.rfind(kShared);
  return shared_layer.substr(0, at) + "ffn.experts." + shared_layer.substr(at + kShared.size());
}

// The MoE layer runs the shared expert as one more group of the routed experts' grouped W13 and
// W2 (kernels/moe_layer.h; checkpoint/expert_weights.h loads it as the last group), and admission
// is decided per GEMM: the unit the kernels prepare is routed + shared. So an MXFP4 shared expert's
// scales join the routed layer of the same MoE layer, as its last group, and a refused byte in
// it refuses the routed W13 (or W2) the kernels run. Where the loader leaves the shared expert out
// (its w1 weight is there and not packed codes, as V4-Flash's FP8 one), so does this; without
// routed experts in the selection (a --pattern), it stays a layer of its own.
void JoinSharedExperts(const Checkpoint& checkpoint, std::map<std::string, LayerMembers>& members) {
  std::vector<std::string> shared_keys;
  for (const auto& [key, layer] : members) {
    const Role& role = layer.read.empty() ? layer.unread.front().role : layer.read.front().role;
    if (role.kind == LayerKind::kSharedW13 || role.kind == LayerKind::kSharedW2) shared_keys.push_back(key);
  }
  for (const std::string& key : shared_keys) {
    const auto routed = members.find(RoutedLayerOf(key));
    if (routed == members.end()) continue;
    constexpr std::string_view kShared = "ffn.shared_experts.";
    const std::string w1_weight = key.substr(0, key.rfind(kShared) + kShared.size()) + "w1.weight";
    const TensorInfo* w1 = checkpoint.Find(w1_weight);
    if (w1 != nullptr && !IsPackedFp4(w1->dtype)) continue;
    auto join = [&](Role& role) {
      role.kind = role.kind == LayerKind::kSharedW2 ? LayerKind::kRoutedW2 : LayerKind::kRoutedW13;
      role.expert = INT_MAX;  // after every routed expert, as the loader appends it
      role.layer = routed->first;
    };
    for (Member& member : members[key].read) {
      join(member.role);
      routed->second.read.push_back(std::move(member));
    }
    for (UnreadMember& member : members[key].unread) {
      join(member.role);
      routed->second.unread.push_back(std::move(member));
    }
    members.erase(key);
  }
}

// The members of each kernel layer, in natural order of the keys: the scales read, and the
// tensors an index names that could not be read, by their names alone (their dtype is not
// known), so that their layers are refused rather than left out. A copy read from a file the
// index does not put it in does not stand in for it.
std::vector<std::pair<std::string, LayerMembers>> GroupLayerMembers(const Checkpoint& checkpoint,
                                                                    const std::optional<std::regex>& pattern,
                                                                    const AuditPlan& plan) {
  std::map<std::string, LayerMembers> members;
  for (size_t i = 0; i < plan.scales.size(); ++i) {
    Role role = RoleOf(plan.scales[i].name);
    members[LayerKey(plan.scales[i].name, role)].read.push_back(Member{i, std::move(role)});
  }
  for (const auto& [name, unread] : checkpoint.unread) {
    Role role = RoleOf(name);
    const bool selected = pattern ? name.size() <= kMaxPatternNameLength && std::regex_match(name, *pattern)
                                  : !role.weight.empty();
    if (selected) members[LayerKey(name, role)].unread.push_back(UnreadMember{name, std::move(role)});
  }
  JoinSharedExperts(checkpoint, members);
  std::vector<std::pair<std::string, LayerMembers>> ordered(std::make_move_iterator(members.begin()),
                                                            std::make_move_iterator(members.end()));
  std::sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) { return NaturalLess(a.first, b.first); });
  return ordered;
}

// Layer names are how verdicts are looked up: a lone tensor whose layer name another layer has
// too is named by its scale tensor instead.
void RenameSharedLoneLayers(AuditPlan& plan) {
  std::unordered_map<std::string, int> uses;
  for (const KernelLayer& layer : plan.layers) ++uses[layer.name];
  for (KernelLayer& layer : plan.layers) {
    if (uses[layer.name] > 1 && layer.kind == LayerKind::kSingle) {
      layer.name = layer.members.empty() ? layer.unread.front() : plan.scales[layer.members[0]].name;
    }
  }
}

}  // namespace

absl::StatusOr<AuditPlan> PlanAudit(const Checkpoint& checkpoint, const SelectionOptions& options) {
  absl::StatusOr<std::optional<std::regex>> pattern = CompilePattern(options);
  if (!pattern.ok()) return pattern.status();
  AuditPlan plan;
  SelectScales(checkpoint, *pattern, plan);
  std::vector<std::pair<std::string, LayerMembers>> ordered = GroupLayerMembers(checkpoint, *pattern, plan);
  LayerBuilder builder(checkpoint, plan);
  for (auto& [key, layer_members] : ordered) {
    const std::string name =
        layer_members.read.empty() ? layer_members.unread.front().role.layer : layer_members.read.front().role.layer;
    builder.Build(name, std::move(layer_members.read), layer_members.unread);
  }
  RenameSharedLoneLayers(plan);
  return plan;
}

}  // namespace mxdiff::checkpoint
