// fuzz_layer's structure-aware mutator: decodes a layer case, changes it the way layer bugs hide
// (routings with all tokens on one expert, experts with no tokens, repeated experts, expert ids
// out of range, extreme routing weights, fp16 specials; scale bytes admitted or refused per GEMM
// and per replay; capacities at and below the worst routing; every CTA shape, split counts and
// swizzles, requests and policies), and encodes it again, always within `profile`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "fuzz/mutators/case_mutator.h"
#include "fuzz/formats/layer_case_format.h"

namespace mxdiff::fuzz {

struct LayerProfile {
  int max_hidden = 128;
  int max_intermediate = 64;
  int max_experts = 8;
  int max_top_k = 6;  // one shape in eight draws from the format's whole range instead
  int max_tokens = 4;
  int max_replays = 4;
};
inline constexpr LayerProfile kLayerProfile{};

LayerCase RandomLayerCase(CaseRng& rng, const LayerProfile& profile);
void MutateLayerCase(LayerCase& c, CaseRng& rng, const LayerProfile& profile);

// LLVMFuzzerCustomMutator's body: an undecodable input becomes a random case. Returns the new
// size (at most max_size; 0 if no case that small exists).
// The names of the mutations MutateLayerCase draws from, each once (fuzz/mutators/mutation_sequence.h).
std::vector<std::string_view> LayerMutationNames();

size_t MutateEncodedLayerCase(uint8_t* data, size_t size, size_t max_size, unsigned seed, const LayerProfile& profile);

}  // namespace mxdiff::fuzz
