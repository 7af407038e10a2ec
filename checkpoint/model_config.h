// What the model's config.json beside a checkpoint says that the kernels need: today the MoE
// top-k (`num_experts_per_tok`). A config.json that is there but unusable is named with its
// problem, never taken for a missing one.
#pragma once

#include <string>
#include <vector>

namespace mxdiff::checkpoint {

struct ModelTopK {
  int top_k = 0;
  std::string source;  // where top_k comes from, e.g. "config.json num_experts_per_tok = 2"
};

// config.json in the folder `paths` names first (or in the folder of the file it names):
// `num_experts_per_tok`, else DeepSeek V4's 6, always within 1 .. min(experts, kMaxMoeTopK).
// `source` says which; where config.json exists but cannot be read, is not JSON, or holds no
// integer num_experts_per_tok, it names the file and the problem, then the top-k used.
ModelTopK ReadModelTopK(const std::vector<std::string>& paths, int experts);

}  // namespace mxdiff::checkpoint
