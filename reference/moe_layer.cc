#include "reference/moe_layer.h"

#include "fmt/core.h"
#include "reference/moe_layer_combine.h"
#include "reference/reference_gemm.h"
#include "reference/status_macros.h"

namespace mxdiff {

absl::Status ValidateMoeShape(const MoeShape& shape) {
  if (shape.hidden < kBlockK || shape.hidden % kBlockK != 0) {
    return absl::InvalidArgumentError(
        fmt::format("hidden must be a positive multiple of {}, got {}", kBlockK, shape.hidden));
  }
  if (shape.intermediate < kBlockK || shape.intermediate % kBlockK != 0) {
    return absl::InvalidArgumentError(
        fmt::format("intermediate must be a positive multiple of {} (W2's K), got {}", kBlockK, shape.intermediate));
  }
  if (shape.experts < 1 || shape.experts > kMaxMoeExperts) {
    return absl::InvalidArgumentError(fmt::format("experts must be 1..{}, got {}", kMaxMoeExperts, shape.experts));
  }
  if (shape.top_k < 1 || shape.top_k > kMaxMoeTopK) {
    return absl::InvalidArgumentError(fmt::format("top_k must be 1..{}, got {}", kMaxMoeTopK, shape.top_k));
  }
  return absl::OkStatus();
}

absl::Status ValidateMoeProblem(const MoeLayerProblem& p) {
  MXDIFF_RETURN_IF_ERROR(ValidateMoeShape(p.shape));
  const MoeShape& s = p.shape;
  if (p.routing.tokens < 0) return absl::InvalidArgumentError(fmt::format("tokens {} < 0", p.routing.tokens));
  const size_t entries = size_t(p.routing.tokens) * size_t(s.top_k);
  auto check = [](const char* what, size_t got, size_t want) {
    return got == want ? absl::OkStatus()
                       : absl::InvalidArgumentError(fmt::format("{} has {} elements, the shape needs {}", what, got, want));
  };
  const size_t groups = size_t(s.groups()), hidden = size_t(s.hidden), inter = size_t(s.intermediate);
  for (absl::Status status : {check("expert_ids", p.routing.expert_ids.size(), entries),
                              check("routing weights", p.routing.weights.size(), entries),
                              check("activations", p.activations.size(), size_t(p.routing.tokens) * hidden),
                              check("w13 codes", p.w13.codes.size(), groups * 2 * inter * hidden / 2),
                              check("w13 scales", p.w13.scales.size(), groups * 2 * inter * hidden / kBlockK),
                              check("w2 codes", p.w2.codes.size(), groups * hidden * inter / 2),
                              check("w2 scales", p.w2.scales.size(), groups * hidden * inter / kBlockK)}) {
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::StatusOr<MoeSchedule> ScheduleMoeRouting(const MoeShape& shape, const MoeRouting& routing) {
  MXDIFF_RETURN_IF_ERROR(ValidateMoeShape(shape));
  const int k = shape.top_k;
  const size_t entries = size_t(routing.tokens) * size_t(k);
  if (routing.tokens < 0 || routing.expert_ids.size() != entries) {
    return absl::InvalidArgumentError(fmt::format("{} tokens x top-{} need {} expert ids, got {}", routing.tokens, k,
                                                  entries, routing.expert_ids.size()));
  }
  const int groups = shape.groups();
  MoeSchedule schedule;
  schedule.row_offsets.assign(size_t(groups) + 1, 0);
  for (size_t i = 0; i < entries; ++i) {
    const int32_t id = routing.expert_ids[i];
    if (id < 0 || id >= shape.experts) {
      return absl::InvalidArgumentError(fmt::format("token {} slot {}: expert id {} is outside 0..{}", i / size_t(k),
                                                    i % size_t(k), id, shape.experts - 1));
    }
    ++schedule.row_offsets[size_t(id) + 1];
  }
  if (shape.shared_expert) schedule.row_offsets[size_t(shape.experts) + 1] = routing.tokens;
  for (int g = 0; g < groups; ++g) schedule.row_offsets[g + 1] += schedule.row_offsets[g];
  schedule.row_token.assign(size_t(schedule.rows()), 0);
  schedule.entry_row.assign(entries, 0);
  std::vector<int32_t> next(schedule.row_offsets.begin(), schedule.row_offsets.end() - 1);
  for (size_t i = 0; i < entries; ++i) {
    const int row = next[size_t(routing.expert_ids[i])]++;
    schedule.entry_row[i] = row;
    schedule.row_token[size_t(row)] = int32_t(i / size_t(k));
  }
  if (shape.shared_expert) {
    for (int t = 0; t < routing.tokens; ++t) schedule.row_token[size_t(schedule.shared_row(shape, t))] = t;
  }
  return schedule;
}

GroupedProblem MoeW13Problem(const MoeLayerProblem& p, const MoeSchedule& schedule,
                             std::span<const uint16_t> gathered) {
  return GroupedProblem{.groups = p.shape.groups(),
                        .n = p.shape.w13_n(),
                        .k = p.shape.hidden,
                        .row_offsets = schedule.row_offsets,
                        .activations = gathered,
                        .packed_codes = p.w13.codes,
                        .scale_bytes = p.w13.scales};
}

GroupedProblem MoeW2Problem(const MoeLayerProblem& p, const MoeSchedule& schedule,
                            std::span<const uint16_t> activated) {
  return GroupedProblem{.groups = p.shape.groups(),
                        .n = p.shape.hidden,
                        .k = p.shape.intermediate,
                        .row_offsets = schedule.row_offsets,
                        .activations = activated,
                        .packed_codes = p.w2.codes,
                        .scale_bytes = p.w2.scales};
}

uint16_t MoeCombineElement(const MoeLayerProblem& p, const MoeSchedule& schedule, std::span<const uint16_t> w2,
                           int token, int column) {
  const size_t hidden = size_t(p.shape.hidden);
  float acc = 0.0f;
  for (int s = 0; s < p.shape.top_k; ++s) {
    const size_t entry = size_t(token) * size_t(p.shape.top_k) + size_t(s);
    acc = moe_combine_slot(acc, p.routing.weights[entry], w2[size_t(schedule.entry_row[entry]) * hidden + column]);
  }
  if (p.shape.shared_expert) {
    acc = moe_combine_shared(acc, w2[size_t(schedule.shared_row(p.shape, token)) * hidden + column]);
  }
  return f32_to_f16_rne(acc);
}

absl::StatusOr<MoeLayerStages> ReferenceMoeLayer(const MoeLayerProblem& p, const MoeLayerOptions& options) {
  MXDIFF_RETURN_IF_ERROR(ValidateMoeProblem(p));
  MoeLayerStages stages;
  absl::StatusOr<MoeSchedule> schedule = ScheduleMoeRouting(p.shape, p.routing);
  if (!schedule.ok()) return schedule.status();
  stages.schedule = *std::move(schedule);
  const size_t rows = size_t(stages.schedule.rows());
  const size_t hidden = size_t(p.shape.hidden), inter = size_t(p.shape.intermediate);

  stages.gathered.resize(rows * hidden);
  for (size_t r = 0; r < rows; ++r) {
    const uint16_t* source = p.activations.data() + size_t(stages.schedule.row_token[r]) * hidden;
    std::copy(source, source + hidden, stages.gathered.begin() + r * hidden);
  }
  ReferenceOptions gemm{.transform = options.w13.transform,
                        .model = options.model,
                        .tactic = options.w13.tactic,
                        .threads = options.threads};
  if (absl::Status status = ReferenceGemm(MoeW13Problem(p, stages.schedule, stages.gathered), gemm, stages.w13);
      !status.ok()) {
    return status;
  }
  stages.activated.resize(rows * inter);
  for (size_t r = 0; r < rows; ++r) {
    const uint16_t* gate = stages.w13.data() + r * 2 * inter;
    for (size_t j = 0; j < inter; ++j) {
      stages.activated[r * inter + j] = swiglu_f16(gate[j], gate[inter + j], options.swiglu_limit);
    }
  }
  gemm.transform = options.w2.transform;
  gemm.tactic = options.w2.tactic;
  if (absl::Status status = ReferenceGemm(MoeW2Problem(p, stages.schedule, stages.activated), gemm, stages.w2);
      !status.ok()) {
    return status;
  }
  stages.output.resize(size_t(p.routing.tokens) * hidden);
  for (int t = 0; t < p.routing.tokens; ++t) {
    for (size_t h = 0; h < hidden; ++h) {
      stages.output[size_t(t) * hidden + h] = MoeCombineElement(p, stages.schedule, stages.w2, t, int(h));
    }
  }
  return stages;
}

}  // namespace mxdiff
