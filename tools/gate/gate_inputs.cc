#include "tools/gate/gate_inputs.h"

#include <algorithm>
#include <numeric>

#include "reference/fp16.h"

namespace mxdiff::gate {

MoeInputs DrawMoeInputs(const MoeShape& shape, int tokens, std::mt19937_64& random) {
  MoeInputs inputs{.tokens = tokens};
  std::normal_distribution<float> normal(0.0f, 1.0f);
  inputs.activations.resize(size_t(tokens) * size_t(shape.hidden));
  for (uint16_t& value : inputs.activations) value = f32_to_f16_rne(normal(random));
  std::vector<int32_t> experts(size_t(shape.experts));
  std::iota(experts.begin(), experts.end(), 0);
  std::uniform_real_distribution<float> uniform(0.05f, 1.0f);
  for (int token = 0; token < tokens; ++token) {
    std::shuffle(experts.begin(), experts.end(), random);  // distinct experts, as a top-k picks them
    std::vector<float> weights(size_t(shape.top_k));
    for (float& weight : weights) weight = uniform(random);
    const float sum = std::accumulate(weights.begin(), weights.end(), 0.0f);
    for (int slot = 0; slot < shape.top_k; ++slot) {
      inputs.expert_ids.push_back(experts[size_t(slot)]);
      inputs.weights.push_back(weights[size_t(slot)] / sum);
    }
  }
  return inputs;
}

int CaseTokens(int index, std::mt19937_64& random) {
  if (index == 0) return 1;
  if (index == 1) return kGateMaxTokens;
  return std::uniform_int_distribution<int>(1, kGateMaxTokens)(random);
}

}  // namespace mxdiff::gate
