// Names and dispatch of the step models; each model lives in its own step_model_*.cc.
#include "reference/step_model.h"

#include "reference/fp16.h"
#include "reference/step_model_internal.h"

namespace mxdiff {

std::string_view StepModelName(StepModel model) {
  switch (model) {
    case StepModel::kV100:
      return "v100";
    case StepModel::kSm90Emulated:
      return "sm90-emulated";
    case StepModel::kSm90EmulatedFtz:
      return "sm90-emulated-ftz";
    case StepModel::kExact:
      return "exact";
  }
  return "unknown";
}

std::optional<StepModel> ParseStepModel(std::string_view name) {
  for (StepModel model : kAllStepModels) {
    if (StepModelName(model) == name) return model;
  }
  return std::nullopt;
}

uint32_t Step(StepModel model, uint32_t c, std::span<const uint16_t, 4> a, std::span<const uint16_t, 4> b) {
  switch (model) {
    case StepModel::kV100:
      return internal::StepV100(c, a.data(), b.data());
    case StepModel::kSm90Emulated:
      return internal::StepSm90(c, a.data(), b.data());
    case StepModel::kSm90EmulatedFtz:
      return internal::StepSm90Ftz(c, a.data(), b.data());
    case StepModel::kExact:
      return internal::StepExact(c, a.data(), b.data());
  }
  return kF32CanonicalNaN;  // unreachable for a valid enum
}

uint32_t ReduceAdd(StepModel model, uint32_t partial_sum, uint32_t partial) {
  return model == StepModel::kSm90EmulatedFtz ? internal::AddF32RneFtz(partial_sum, partial)
                                              : internal::AddF32Rne(partial_sum, partial);
}

uint32_t ChainSteps(StepModel model, uint32_t c, std::span<const uint16_t> a, std::span<const uint16_t> b) {
  for (size_t k = 0; k + 4 <= a.size() && k + 4 <= b.size(); k += 4) {
    c = Step(model, c, a.subspan(k).first<4>(), b.subspan(k).first<4>());
  }
  return c;
}

}  // namespace mxdiff
