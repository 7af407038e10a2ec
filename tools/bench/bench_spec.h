// What `mxdiff bench` compares, parsed from the command line: arms, shapes, tactics. CUDA-free.
//
//   arm    ordinary | folded               the builtin kernel with the pinned tactic
//          ordinary@TACTIC | folded@TACTIC  the builtin kernel with this tactic pinned instead
//          ext:PATH | ext-folded:PATH       an external kernel (fuzz/modules/mxdiff_kernel_abi.h)
//                                           computing the ordinary or the folded transform
//   tactic CMxCNxCK/sSPLITS[/wSWIZZLE]      e.g. 8x128x64/s16 (swizzle 0 when left out)
//   shape  w13-tp4 | w2-tp4 | w13-tp8 | w2-tp8 (the decode shapes, PP2 x TP4 and TP8) | NxK
//          layer-tp4 | layer-tp8      the whole MoE layer (layer_bench.h): hidden 4096, 256 routed
//                                     experts + the shared one, top-6, intermediate 512 or 256
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "reference/problem.h"
#include "reference/transform.h"

namespace mxdiff::bench {

enum class ArmKind : uint8_t { kBuiltin = 0, kExternal = 1 };

struct ArmSpec {
  ArmKind kind = ArmKind::kBuiltin;
  Transform transform = Transform::kOrdinary;
  std::optional<Tactic> tactic;  // builtin only: overrides the pinned tactic
  std::string library;           // external only
  std::string text;              // as given

  // "ordinary", "folded@16x128x32/s8/w0", "ext:libfoo.so", ...
  std::string Label() const;
  friend bool operator==(const ArmSpec&, const ArmSpec&) = default;
};

absl::StatusOr<Tactic> ParseTactic(std::string_view text);
absl::StatusOr<ArmSpec> ParseArmSpec(std::string_view text);
// "A,B": exactly two arms.
absl::StatusOr<std::pair<ArmSpec, ArmSpec>> ParseArmPair(std::string_view text);

struct ShapeSpec {
  std::string name;  // "W13 PP2xTP4", or "N1000 K512" for NxK
  int n = 0;
  int k = 0;
  bool layer = false;  // the whole MoE layer: n is the hidden size, k the intermediate per rank
  friend bool operator==(const ShapeSpec&, const ShapeSpec&) = default;
};

absl::StatusOr<ShapeSpec> ParseShape(std::string_view text);
// Comma-separated; empty text: DefaultShapes().
absl::StatusOr<std::vector<ShapeSpec>> ParseShapes(std::string_view text);
// W13 and W2 at PP2 x TP4 (K 4096 N 1024, K 512 N 4096) and TP8 (K 4096 N 512, K 256 N 4096).
std::vector<ShapeSpec> DefaultShapes();

}  // namespace mxdiff::bench
