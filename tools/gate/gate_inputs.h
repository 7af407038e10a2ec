// The MoE layer inputs the gate draws for its cases (steps 3 and 4): a decode batch of 1..8
// tokens, fp16 activations, a top-k routing of distinct experts with positive weights summing to 1.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "reference/moe_layer.h"

namespace mxdiff::gate {

inline constexpr int kGateMaxTokens = 8;

struct MoeInputs {
  int tokens = 0;
  std::vector<uint16_t> activations{};  // tokens x hidden
  std::vector<int32_t> expert_ids{};    // tokens x top_k
  std::vector<float> weights{};         // tokens x top_k

  MoeLayerProblem Problem(const MoeShape& shape, MoeGemmWeights w13, MoeGemmWeights w2) const {
    return {.shape = shape, .routing = {tokens, expert_ids, weights}, .activations = activations, .w13 = w13, .w2 = w2};
  }
};

MoeInputs DrawMoeInputs(const MoeShape& shape, int tokens, std::mt19937_64& random);

// Case `index` of a run: 1 token first, then kGateMaxTokens, then drawn from 1..kGateMaxTokens.
int CaseTokens(int index, std::mt19937_64& random);

}  // namespace mxdiff::gate
