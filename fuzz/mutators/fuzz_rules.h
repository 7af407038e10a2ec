// Rules more than one fuzz target needs, written once here (fuzz/mutators/README.md), so that no
// module or check types them a second time: the interesting tile sizes and the rule that maps a
// tactic the builtin kernels do not instantiate onto one they do.
#pragma once

#include <span>
#include <string>

#include "kernels/route.h"

namespace mxdiff::fuzz {

// The cta_m / cta_n sizes the mutators pick from: the builtin shapes' and the edges (a 1-wide
// tile, the format's largest).
inline constexpr int kInterestingTiles[] = {1, 8, 16, 24, 32, 64, 128, 256};

// A tactic the kernels do not instantiate, onto one of `built` (deterministically: by the sum of
// its tile sizes), keeping its splits and swizzle. `tactic` itself when `built` is empty.
Tactic PickBuiltTactic(const Tactic& tactic, std::span<const Tactic> built);

}  // namespace mxdiff::fuzz
