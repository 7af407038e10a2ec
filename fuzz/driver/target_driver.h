// What every fuzz target's LLVMFuzzerTestOneInput / LLVMFuzzerCustomMutator does, in one
// place: decode (a rejected input returns -1 so libFuzzer keeps it out of the corpus), run the
// target's check; on a finding run it again in a fresh state (ConfirmInFreshState), write it
// with the inputs the worker ran before it, and abort; mutate structurally within the target's
// profile.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>

#include "fuzz/mutators/case_mutator.h"
#include "fuzz/driver/findings.h"

namespace mxdiff::fuzz {

using CaseCheck = std::function<CheckResult(const FuzzCase&)>;

// `check(fresh)` decodes and checks the input: nullopt when it is not a case; `fresh`: from a
// clean state (the target drops what it caches across inputs first). Returns libFuzzer's -1 or 0.
int CheckFuzzInput(std::string_view target, std::span<const uint8_t> input,
                   const std::function<std::optional<CheckResult>(bool fresh)>& check);

// CheckFuzzInput for the targets of the case format; `forget_state` drops the target's own caches.
int RunFuzzInput(std::string_view target, const uint8_t* data, size_t size, const CaseCheck& check,
                 const std::function<void()>& forget_state = {});

// MXDIFF_REQUIRE_GPU=1, which the campaign sets where `nvidia-smi -L` lists a GPU: a GPU target
// that cannot use the device then stops before fuzzing instead of checking its CPU side only.
bool GpuRequired();

size_t MutateFuzzInput(uint8_t* data, size_t size, size_t max_size, unsigned seed, const MutationProfile& profile);

// The mutation profiles of the targets (one place, so the seed generator uses the same sizes).
// The CPU targets stay small (their property costs several reference runs per case); fuzz_gemm
// jumps to a real decode shape (W13 and W2, top-6 routing over 6 or 256 experts, a shared
// expert, 512 rows) in one mutation of 2, which then grows and shrinks within `large` until
// pulled back in one mutation of 2 (fuzz/mutators/case_mutator.h): where the device oracle judges
// them (fuzz/README.md, issue 19) a real shape costs the host little, and a third of the cases
// should be at the shapes the kernels ship for.
inline constexpr ShapeLimits SmallLimits(int groups, int rows_per_group, int n, int k) {
  return ShapeLimits{groups, rows_per_group, groups * rows_per_group, n, k, kMaxWeightElements, int64_t{1} << 40};
}
inline constexpr MutationProfile kTransformProfile{SmallLimits(2, 1, 8, 64), SmallLimits(2, 1, 8, 64), 0, 2, 1024};
inline constexpr MutationProfile kDispatchProfile{SmallLimits(2, 1, 4, 64), SmallLimits(2, 1, 4, 64), 0, 2, 1024};
inline constexpr MutationProfile kReferenceProfile{SmallLimits(2, 2, 8, 128), SmallLimits(2, 2, 8, 128), 0, 2,
                                                   2048};
// large: every format bound, the reference's work per case at most 2^26 products (16 rows at
// W13, rows x N x K = 16 x 1024 x 4096; the one-token decode is 6 rows, 2^24.6).
inline constexpr MutationProfile kGemmProfile{
    SmallLimits(4, 2, 64, 256),
    ShapeLimits{kMaxGroups, kMaxRowsPerGroup, kMaxRows, kMaxN, kMaxK, kMaxWeightElements, int64_t{1} << 26},
    2, 2, 32768};

}  // namespace mxdiff::fuzz
