// What every fuzz target's LLVMFuzzerTestOneInput / LLVMFuzzerCustomMutator does, in one
// place: decode (a rejected input returns -1 so libFuzzer keeps it out of the corpus), run the
// target's check, write and abort on a finding; mutate structurally within the target's profile.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>

#include "fuzz/case_mutator.h"
#include "fuzz/findings.h"

namespace mxdiff::fuzz {

using CaseCheck = std::function<CheckResult(const FuzzCase&)>;

int RunFuzzInput(std::string_view target, const uint8_t* data, size_t size, const CaseCheck& check);

size_t MutateFuzzInput(uint8_t* data, size_t size, size_t max_size, unsigned seed, const MutationProfile& profile);

// The mutation profiles of the targets (one place, so the seed generator uses the same sizes).
inline constexpr MutationProfile kTransformProfile{2, 1, 8, 64};
inline constexpr MutationProfile kDispatchProfile{2, 1, 4, 64};
inline constexpr MutationProfile kReferenceProfile{2, 2, 8, 128};
inline constexpr MutationProfile kGemmProfile{4, 2, 64, 256};

}  // namespace mxdiff::fuzz
