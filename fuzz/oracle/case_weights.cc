#include "fuzz/oracle/case_weights.h"

#include <algorithm>

#include "fuzz/formats/tensor_recipe.h"

namespace mxdiff::fuzz {

bool TensorOnHost(const FuzzCase& c, TensorKind kind) {
  const bool empty = kind == TensorKind::kCodes    ? c.packed_codes.empty()
                     : kind == TensorKind::kScales ? c.scale_bytes.empty()
                                                   : c.activations.empty();
  return !empty || !c.recipe(kind).has_value() || c.element_count(kind) == 0;
}

CaseWeights::CaseWeights(DifferentialCounters& counters, std::unique_ptr<DeviceRecipeWeights> device)
    : counters_(counters), device_(std::move(device)) {}

void CaseWeights::Begin(const FuzzCase& c) {
  case_ = &c;
  deferred_ = !TensorOnHost(c, TensorKind::kCodes) || !TensorOnHost(c, TensorKind::kScales);
  late_ = host_case_ready_ = scales_ready_ = row_groups_ready_ = false;
  on_device_.reset();
}

absl::StatusOr<const DeviceCaseWeights*> CaseWeights::OnDevice() {
  if (!on_device_) {
    on_device_ = device_ != nullptr ? device_->Of(*case_)
                                    : absl::UnavailableError("no device materialization of recipe weights here");
  }
  return *on_device_;
}

void CaseWeights::ForgetState() {
  on_device_.reset();
  if (device_ != nullptr) device_->Forget();
}

std::span<const uint8_t> CaseWeights::HostScales() {
  const FuzzCase& c = *case_;
  if (TensorOnHost(c, TensorKind::kScales)) return c.scale_bytes;
  if (!scales_ready_) {
    PhaseTimer timer(counters_.seconds_in(Phase::kDecode));
    scales_ready_ = late_ = true;
    host_scales_.resize(c.element_count(TensorKind::kScales));
    MaterializeScales(*c.recipe(TensorKind::kScales), host_scales_);
  }
  return host_scales_;
}

const FuzzCase& CaseWeights::HostCase() {
  const FuzzCase& c = *case_;
  if (!deferred_) return c;
  if (!host_case_ready_) {
    PhaseTimer timer(counters_.seconds_in(Phase::kDecode));
    late_ = true;
    const std::span<const uint8_t> scales = HostScales();  // the sample's, where it came first
    host_case_ = c;
    host_case_.scale_bytes.assign(scales.begin(), scales.end());
    if (!TensorOnHost(c, TensorKind::kCodes)) {
      host_case_.packed_codes.resize(c.element_count(TensorKind::kCodes) / 2);
      MaterializeCodes(*c.recipe(TensorKind::kCodes), host_case_.packed_codes);
    }
    host_case_ready_ = true;
  }
  return host_case_;
}

GroupedProblem CaseWeights::RowGroupsProblem() {
  const FuzzCase& c = *case_;
  const std::vector<int> groups = c.GroupsWithRows();
  if (!deferred_ && (groups.empty() || int(groups.size()) == c.groups)) return c.Problem();
  if (!row_groups_ready_) {
    const std::span<const uint8_t> scale_bytes = HostScales();
    PhaseTimer timer(counters_.seconds_in(Phase::kDecode));
    const bool codes_from_recipe = !TensorOnHost(c, TensorKind::kCodes);
    const size_t codes = size_t(c.n) * size_t(c.k) / 2, scales = size_t(c.n) * size_t(c.k) / kBlockK;
    row_groups_.groups = int(groups.size());
    row_groups_.row_offsets.assign(1, 0);
    row_groups_.codes.resize(groups.size() * codes);
    row_groups_.scales.resize(groups.size() * scales);
    late_ |= codes_from_recipe;
    for (size_t i = 0; i < groups.size(); ++i) {
      const int g = groups[i];
      row_groups_.row_offsets.push_back(row_groups_.row_offsets.back() + c.row_offsets[g + 1] - c.row_offsets[g]);
      const std::span<uint8_t> group_codes(row_groups_.codes.data() + i * codes, codes);
      if (codes_from_recipe) {
        MaterializeCodeSlice(*c.recipe(TensorKind::kCodes), uint64_t(g) * codes * 2, group_codes);
      } else {
        std::copy_n(c.packed_codes.begin() + ptrdiff_t(size_t(g) * codes), codes, group_codes.begin());
      }
      std::copy_n(scale_bytes.begin() + ptrdiff_t(size_t(g) * scales), scales,
                  row_groups_.scales.begin() + ptrdiff_t(i * scales));
    }
    row_groups_ready_ = true;
  }
  GroupedProblem problem = c.Problem();
  problem.groups = row_groups_.groups;
  problem.row_offsets = row_groups_.row_offsets;
  problem.packed_codes = row_groups_.codes;
  problem.scale_bytes = row_groups_.scales;
  return problem;
}

}  // namespace mxdiff::fuzz
