#include "tools/bench/bench_spec.h"

#include <charconv>

#include "fmt/format.h"

namespace mxdiff::bench {
namespace {

// Every piece between `separator`s, empty ones included ("a,,b" -> a, "", b).
std::vector<std::string_view> Split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  size_t begin = 0;
  for (size_t end; (end = text.find(separator, begin)) != std::string_view::npos; begin = end + 1) {
    parts.push_back(text.substr(begin, end - begin));
  }
  parts.push_back(text.substr(begin));
  return parts;
}

// A decimal integer in [1, 1 << 30], the whole of `text`.
std::optional<int> PositiveInt(std::string_view text) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 1 || value > (1 << 30)) return std::nullopt;
  return value;
}

// Swizzle may be 0.
std::optional<int> NonNegativeInt(std::string_view text) {
  if (text == "0") return 0;
  return PositiveInt(text);
}

constexpr struct {
  const char* key;
  const char* name;
  int n;
  int k;
} kPresets[] = {{"w13-tp4", "W13 PP2xTP4", 1024, 4096},
                {"w2-tp4", "W2 PP2xTP4", 4096, 512},
                {"w13-tp8", "W13 TP8", 512, 4096},
                {"w2-tp8", "W2 TP8", 4096, 256}};

}  // namespace

std::string ArmSpec::Label() const {
  if (kind == ArmKind::kExternal) {
    return fmt::format("{}:{}", transform == Transform::kOrdinary ? "ext" : "ext-folded", library);
  }
  const std::string_view variant = transform == Transform::kOrdinary ? "ordinary" : "folded";
  return tactic ? fmt::format("{}@{}", variant, TacticName(*tactic)) : std::string(variant);
}

absl::StatusOr<Tactic> ParseTactic(std::string_view text) {
  const auto bad = [text](std::string_view why) {
    return absl::InvalidArgumentError(
        fmt::format("tactic '{}': {} (expected CMxCNxCK/sSPLITS[/wSWIZZLE], e.g. 8x128x64/s16)", text, why));
  };
  const std::vector<std::string_view> parts = Split(text, '/');
  if (parts.size() < 2 || parts.size() > 3) return bad("wrong number of '/' parts");
  const std::vector<std::string_view> cta = Split(parts[0], 'x');
  if (cta.size() != 3) return bad("the CTA shape needs three sizes");
  Tactic tactic;
  std::optional<int> m = PositiveInt(cta[0]), n = PositiveInt(cta[1]), k = PositiveInt(cta[2]);
  if (!m || !n || !k) return bad("CTA sizes must be positive integers");
  if (parts[1].size() < 2 || parts[1][0] != 's') return bad("the second part must be sSPLITS");
  std::optional<int> splits = PositiveInt(parts[1].substr(1));
  if (!splits) return bad("splits must be a positive integer");
  std::optional<int> swizzle = 0;
  if (parts.size() == 3) {
    if (parts[2].size() < 2 || parts[2][0] != 'w') return bad("the third part must be wSWIZZLE");
    swizzle = NonNegativeInt(parts[2].substr(1));
    if (!swizzle) return bad("swizzle must be a non-negative integer");
  }
  tactic = Tactic{.cta_m = *m, .cta_n = *n, .cta_k = *k, .splits = *splits, .swizzle = *swizzle};
  if (absl::Status status = ValidateTactic(tactic); !status.ok()) return bad(std::string(status.message()));
  return tactic;
}

absl::StatusOr<ArmSpec> ParseArmSpec(std::string_view text) {
  ArmSpec spec;
  spec.text = std::string(text);
  for (auto [prefix, transform] : {std::pair{std::string_view("ext:"), Transform::kOrdinary},
                                   std::pair{std::string_view("ext-folded:"), Transform::kFolded}}) {
    if (text.substr(0, prefix.size()) == prefix) {
      spec.kind = ArmKind::kExternal;
      spec.transform = transform;
      spec.library = std::string(text.substr(prefix.size()));
      if (spec.library.empty()) {
        return absl::InvalidArgumentError(fmt::format("arm '{}': no library path after '{}'", text, prefix));
      }
      return spec;
    }
  }
  const size_t at = text.find('@');
  const std::string_view variant = text.substr(0, at);
  if (variant == "ordinary") {
    spec.transform = Transform::kOrdinary;
  } else if (variant == "folded") {
    spec.transform = Transform::kFolded;
  } else {
    return absl::InvalidArgumentError(fmt::format(
        "arm '{}': expected ordinary, folded, ordinary@TACTIC, folded@TACTIC, ext:PATH or ext-folded:PATH", text));
  }
  if (at != std::string_view::npos) {
    absl::StatusOr<Tactic> tactic = ParseTactic(text.substr(at + 1));
    if (!tactic.ok()) return absl::InvalidArgumentError(fmt::format("arm '{}': {}", text, std::string(tactic.status().message())));
    spec.tactic = *tactic;
  }
  return spec;
}

absl::StatusOr<std::pair<ArmSpec, ArmSpec>> ParseArmPair(std::string_view text) {
  const std::vector<std::string_view> parts = Split(text, ',');
  if (parts.size() != 2) {
    return absl::InvalidArgumentError(fmt::format("--arms '{}': expected exactly two arms, A,B", text));
  }
  absl::StatusOr<ArmSpec> a = ParseArmSpec(parts[0]);
  if (!a.ok()) return a.status();
  absl::StatusOr<ArmSpec> b = ParseArmSpec(parts[1]);
  if (!b.ok()) return b.status();
  return std::pair{*std::move(a), *std::move(b)};
}

absl::StatusOr<ShapeSpec> ParseShape(std::string_view text) {
  for (const auto& preset : kPresets) {
    if (text == preset.key) return ShapeSpec{preset.name, preset.n, preset.k};
  }
  if (text == "layer-tp4") return ShapeSpec{"MoE layer PP2xTP4", 4096, 512, true};
  if (text == "layer-tp8") return ShapeSpec{"MoE layer TP8", 4096, 256, true};
  const std::vector<std::string_view> parts = Split(text, 'x');
  std::optional<int> n = parts.size() == 2 ? PositiveInt(parts[0]) : std::nullopt;
  std::optional<int> k = parts.size() == 2 ? PositiveInt(parts[1]) : std::nullopt;
  if (!n || !k) {
    return absl::InvalidArgumentError(
        fmt::format("shape '{}': expected w13-tp4, w2-tp4, w13-tp8, w2-tp8, layer-tp4, layer-tp8 or NxK (e.g. 1024x4096)", text));
  }
  if (*k % kBlockK != 0) {
    return absl::InvalidArgumentError(fmt::format("shape '{}': K must be a multiple of {}", text, kBlockK));
  }
  return ShapeSpec{fmt::format("N{} K{}", *n, *k), *n, *k};
}

absl::StatusOr<std::vector<ShapeSpec>> ParseShapes(std::string_view text) {
  if (text.empty()) return DefaultShapes();
  std::vector<ShapeSpec> shapes;
  for (std::string_view part : Split(text, ',')) {
    absl::StatusOr<ShapeSpec> shape = ParseShape(part);
    if (!shape.ok()) return shape.status();
    shapes.push_back(*std::move(shape));
  }
  return shapes;
}

std::vector<ShapeSpec> DefaultShapes() {
  std::vector<ShapeSpec> shapes;
  for (const auto& preset : kPresets) shapes.push_back(ShapeSpec{preset.name, preset.n, preset.k});
  return shapes;
}

}  // namespace mxdiff::bench
