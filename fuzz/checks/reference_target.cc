#include "fuzz/checks/reference_target.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "fmt/format.h"
#include "fuzz/driver/coverage_counters.h"
#include "fuzz/checks/independent_checks.h"
#include "reference/reference_gemm.h"
#include "reference/split_plan.h"

namespace mxdiff::fuzz {
namespace {

// The elements recomputed independently per case: enough to see every split and group
// without doubling the cost of the case.
constexpr int kRecomputedElements = 6;

struct ElementIndex {
  int row;
  int column;
};

// The dequantized weight column `column` of the row's group, all k.
std::vector<uint16_t> WeightColumn(const FuzzCase& c, Transform transform, int row, int column) {
  const int g = c.group_of_row(row);
  const size_t row_index = size_t(g) * size_t(c.n) + size_t(column);
  const uint8_t* codes = c.packed_codes.data() + row_index * size_t(c.k) / 2;
  const uint8_t* scales = c.scale_bytes.data() + row_index * size_t(c.k) / kBlockK;
  std::vector<uint16_t> weights(size_t(c.k));
  for (int kk = 0; kk < c.k; ++kk) {
    weights[kk] = dequantize(transform, unpack_code(codes, kk), prepared_scale(transform, scales[kk / kBlockK]));
  }
  return weights;
}

uint32_t RecomputeElement(const FuzzCase& c, Transform transform, StepModel model, const Tactic& tactic, int row,
                          int column) {
  const std::vector<uint16_t> weights = WeightColumn(c, transform, row, column);
  const uint16_t* activations = c.activations.data() + size_t(row) * size_t(c.k);
  const int splits = effective_splits(c.k, tactic.cta_k, tactic.splits);
  uint32_t total = 0;
  for (int s = 0; s < splits; ++s) {
    const KRange range = split_k_range(c.k, tactic.cta_k, tactic.splits, s);
    uint32_t accumulator = 0;  // +0
    for (int kk = range.begin; kk < range.end; kk += 4) {
      accumulator = Step(model, accumulator, std::span<const uint16_t, 4>(activations + kk, 4),
                         std::span<const uint16_t, 4>(weights.data() + kk, 4));
    }
    total = s == 0 ? accumulator : ReduceAdd(model, total, accumulator);
  }
  return total;
}

std::string ElementText(const FuzzCase& c, ElementIndex e) {
  return fmt::format("element [{}][{}] (group {})", e.row, e.column, c.group_of_row(e.row));
}

CheckResult CheckPlan(int k, const Tactic& tactic) {
  const int chunk = split_chunk_k(tactic.cta_k);
  const int splits = effective_splits(k, tactic.cta_k, tactic.splits);
  const std::string where = fmt::format("K = {}, tactic {}", k, TacticName(tactic));
  if (chunk % kBlockK != 0 || chunk % tactic.cta_k != 0 || chunk > kBlockK * tactic.cta_k) {
    return Finding{"plan/chunk", fmt::format("chunk {} is not lcm(32, cta_k): {}", chunk, where)};
  }
  if (splits < 1 || splits > tactic.splits || splits > split_chunk_count(k, tactic.cta_k)) {
    return Finding{"plan/split-count", fmt::format("{} effective splits: {}", splits, where)};
  }
  int expected_begin = 0, previous_length = 0;
  for (int s = 0; s < splits; ++s) {
    const KRange range = split_k_range(k, tactic.cta_k, tactic.splits, s);
    const int length = range.end - range.begin;
    if (range.begin != expected_begin || length <= 0) {
      return Finding{"plan/coverage", fmt::format("split {} covers [{}, {}), expected to start at {} and be "
                                                  "non-empty: {}",
                                                  s, range.begin, range.end, expected_begin, where)};
    }
    // Whole chunks except the very end; the longer splits are the last ones.
    const bool last = s == splits - 1;
    if ((!last && length % chunk != 0) || (s > 0 && !last && length < previous_length)) {
      return Finding{"plan/partition", fmt::format("split {} covers [{}, {}) after a split of {} k: {}", s,
                                                   range.begin, range.end, previous_length, where)};
    }
    previous_length = length;
    expected_begin = range.end;
  }
  if (expected_begin != k) {
    return Finding{"plan/coverage", fmt::format("the splits end at k = {}: {}", expected_begin, where)};
  }
  return std::nullopt;
}

// Another tactic with exactly the same per-split k ranges (different cta_k, requested splits,
// CTA M/N or swizzle), or the case's own when none exists.
Tactic SamePartitionTactic(const FuzzCase& c) {
  const Tactic& t = c.tactic;
  const int splits = effective_splits(c.k, t.cta_k, t.splits);
  auto same_partition = [&](const Tactic& other) {
    if (effective_splits(c.k, other.cta_k, other.splits) != splits) return false;
    for (int s = 0; s < splits; ++s) {
      const KRange a = split_k_range(c.k, t.cta_k, t.splits, s), b = split_k_range(c.k, other.cta_k, other.splits, s);
      if (a.begin != b.begin || a.end != b.end) return false;
    }
    return true;
  };
  static constexpr int kCtaK[] = {4, 8, 12, 16, 20, 24, 32, 48, 64, 96, 128, 192, 256};
  const int rotation = int(c.activations.empty() ? 0 : c.activations[0] % std::size(kCtaK));
  for (int i = 0; i < int(std::size(kCtaK)); ++i) {
    Tactic other = t;
    other.cta_k = kCtaK[(i + rotation) % std::size(kCtaK)];
    other.splits = splits;
    other.cta_m = t.cta_m == 16 ? 64 : 16;
    other.swizzle = NextSwizzle(t.swizzle, kMaxSwizzle);
    if (other.cta_k != t.cta_k && same_partition(other)) return other;
  }
  Tactic other = t;
  other.splits = splits;  // a clamped request and its effective count share the partition
  other.cta_n = t.cta_n == 128 ? 64 : 128;
  return other;
}

}  // namespace

Transform ReferenceTransform(const FuzzCase& c) {
  return c.request == TransformRequest::kFolded ? Transform::kFolded : Transform::kOrdinary;
}

namespace {

// The reference's fp32 output of a case under its own settings, which most checks judge.
struct ReferenceRun {
  GroupedProblem problem;
  ReferenceOptions options;
  std::vector<uint32_t> out_f32;
  size_t elements = 0;
  int splits = 0;
  std::string setting;  // the settings in words, for the findings
};

// The run, or the finding that the reference refused a valid case.
CheckResult RunReference(const FuzzCase& c, ReferenceRun& run) {
  run.problem = c.Problem();
  run.options.transform = ReferenceTransform(c);
  run.options.model = c.model;
  run.options.tactic = c.tactic;
  run.options.threads = 1;
  if (absl::Status status = ReferenceGemmF32(run.problem, run.options, run.out_f32); !status.ok()) {
    return Finding{"reference/rejected-valid-case",
                   fmt::format("ReferenceGemmF32 rejected a valid case: {}", status.ToString())};
  }
  run.elements = size_t(c.rows()) * size_t(c.n);
  if (run.out_f32.size() != run.elements) {
    return Finding{"reference/output-size", fmt::format("{} outputs for {} elements", run.out_f32.size(), run.elements)};
  }
  run.splits = effective_splits(c.k, c.tactic.cta_k, c.tactic.splits);
  run.setting = fmt::format("{} {} tactic {} ({} effective splits)", TransformName(run.options.transform),
                            StepModelName(c.model), TacticName(c.tactic), run.splits);
  return std::nullopt;
}

// The fast (vectorized) path against the scalar one: two implementations of one definition.
CheckResult CheckFastVsScalar(const FuzzCase& c, const ReferenceRun& run) {
  ReferenceOptions scalar_options = run.options;
  scalar_options.path = ReferencePath::kScalar;
  std::vector<uint32_t> scalar_f32;
  if (absl::Status status = ReferenceGemmF32(run.problem, scalar_options, scalar_f32); !status.ok()) {
    return Finding{"reference/rejected-valid-case", fmt::format("scalar path: {}", status.ToString())};
  }
  for (size_t i = 0; i < run.elements && i < scalar_f32.size(); ++i) {
    if (scalar_f32[i] != run.out_f32[i]) {
      return Finding{fmt::format("reference/fast-vs-scalar/{}", StepModelName(c.model)),
                     fmt::format("element {}: default path 0x{:08x}, scalar path 0x{:08x} ({} {}, tactic {})", i,
                                 run.out_f32[i], scalar_f32[i], TransformName(run.options.transform),
                                 StepModelName(c.model), TacticName(c.tactic))};
    }
  }
  return std::nullopt;
}

// The trace lists each split's steps in ascending k over exactly the split's range.
CheckResult CheckTraceOrder(const FuzzCase& c, const ReferenceRun& run, const ElementTrace& trace) {
  int split = 0, next_k = split_k_range(c.k, c.tactic.cta_k, c.tactic.splits, 0).begin;
  for (const TraceStep& step : trace.steps) {
    if (step.k < 0) continue;
    if (step.split != split) {
      if (step.split != split + 1 || next_k != split_k_range(c.k, c.tactic.cta_k, c.tactic.splits, split).end) {
        return Finding{"reference/trace-order", fmt::format("trace enters split {} at k {} after split {} "
                                                            "stopped at k {}; {}",
                                                            step.split, step.k, split, next_k, run.setting)};
      }
      split = step.split;
      next_k = split_k_range(c.k, c.tactic.cta_k, c.tactic.splits, split).begin;
    }
    if (step.k != next_k) {
      return Finding{"reference/trace-order",
                     fmt::format("split {} steps at k {}, expected {}; {}", split, step.k, next_k, run.setting)};
    }
    next_k += 4;
  }
  if (split != run.splits - 1 || next_k != c.k) {
    return Finding{"reference/trace-order", fmt::format("trace ends in split {} at k {} (K = {}, {} splits); {}", split,
                                                        next_k, c.k, run.splits, run.setting)};
  }
  return std::nullopt;
}

// The trace of one element agrees with the output, and its steps are in order.
CheckResult CheckTrace(const FuzzCase& c, const ReferenceRun& run, ElementIndex e, size_t flat) {
  absl::StatusOr<ElementTrace> trace = TraceElement(run.problem, run.options, e.row, e.column);
  if (!trace.ok() || trace->result_f32 != run.out_f32[flat] ||
      trace->result_f16 != f32_to_f16_rne(bits_to_f32(run.out_f32[flat]))) {
    return Finding{"reference/trace-result",
                   fmt::format("{}: trace {} disagrees with the output 0x{:08x}; {}", ElementText(c, e),
                               trace.ok() ? fmt::format("0x{:08x}", trace->result_f32) : trace.status().ToString(),
                               run.out_f32[flat], run.setting)};
  }
  return CheckTraceOrder(c, run, *trace);
}

// Stacked oracle: a few elements recomputed from the public pieces, and one traced (in a quarter
// of the cases: each trace builds a plan of its own).
CheckResult CheckRecompute(const FuzzCase& c, const ReferenceRun& run) {
  for (int i = 0; i < kRecomputedElements; ++i) {
    const size_t elements = run.elements;
    const size_t flat = (i == 0 ? 0 : i == 1 ? elements - 1 : (size_t(i) * 7919u + c.activations.size()) % elements);
    const ElementIndex e{int(flat / size_t(c.n)), int(flat % size_t(c.n))};
    const uint32_t expected = RecomputeElement(c, run.options.transform, c.model, c.tactic, e.row, e.column);
    if (expected != run.out_f32[flat]) {
      return Finding{fmt::format("reference/recompute/{}/s{}", StepModelName(c.model), run.splits > 2 ? 3 : run.splits),
                     fmt::format("{}: reference 0x{:08x} ({}), step-by-step recomputation 0x{:08x} ({}); {}",
                                 ElementText(c, e), run.out_f32[flat], bits_to_f32(run.out_f32[flat]), expected,
                                 bits_to_f32(expected), run.setting)};
    }
    if (i != 0 || (c.activations[0] & 3) != 0) continue;
    if (CheckResult finding = CheckTrace(c, run, e, flat)) return finding;
  }
  return std::nullopt;
}

// One element of the model against the exact model: within the bound, specials kept.
CheckResult CheckElementBound(const FuzzCase& c, const ReferenceRun& run, const std::vector<uint32_t>& exact_f32,
                              const std::vector<uint16_t>& weights, ElementIndex e) {
  const size_t flat = size_t(e.row) * size_t(c.n) + size_t(e.column);
  const uint16_t* activations = c.activations.data() + size_t(e.row) * size_t(c.k);
  // abs_sum bounds every term's magnitude. The V100 alignment counts a subnormal fp16 factor at
  // 2^-14 (reference/gemm_plan.h), so there the terms count at that size.
  double abs_sum = 0.0, sum = 0.0;
  for (int kk = 0; kk < c.k; ++kk) {
    const double a = f16_to_f32(activations[kk]), w = f16_to_f32(weights[kk]);
    const double product = a * w;
    sum += product;
    if (c.model == StepModel::kV100 && product != 0.0) {
      abs_sum += std::max(std::fabs(a), 0x1p-14) * std::max(std::fabs(w), 0x1p-14);
    } else {
      abs_sum += std::fabs(product);
    }
  }
  const float got = bits_to_f32(run.out_f32[flat]), exact = bits_to_f32(exact_f32[flat]);
  if (!std::isfinite(sum)) {
    // Specials: NaN stays NaN, an infinity of one sign stays that infinity; the V100 model skips
    // zero products, so 0 x Inf is its own business.
    if (c.model == StepModel::kV100) return std::nullopt;
    const bool ok = std::isnan(sum) ? (std::isnan(got) && std::isnan(exact)) : (got == sum && exact == sum);
    if (ok) return std::nullopt;
    return Finding{fmt::format("reference/specials/{}", StepModelName(c.model)),
                   fmt::format("{}: real sum {}, model {}, exact {}; {}", ElementText(c, e), sum, got, exact, run.setting)};
  }
  const double bound = ModelErrorBound(abs_sum, c.k / 4, run.splits);
  if (std::isfinite(got) && std::isfinite(exact) && std::fabs(double(got) - double(exact)) <= bound) return std::nullopt;
  return Finding{fmt::format("reference/exact-bound/{}", StepModelName(c.model)),
                 fmt::format("{}: model {} ({:a}), exact {} ({:a}), difference {:a} exceeds the bound {:a} "
                             "(sum of |products| {:a}); {}",
                             ElementText(c, e), got, got, exact, exact, double(got) - double(exact), bound, abs_sum,
                             run.setting)};
}

// The model against the exact model, within the bound.
CheckResult CheckExactBound(const FuzzCase& c, const ReferenceRun& run) {
  if (c.model == StepModel::kExact) return std::nullopt;
  ReferenceOptions exact_options = run.options;
  exact_options.model = StepModel::kExact;
  std::vector<uint32_t> exact_f32;
  if (absl::Status status = ReferenceGemmF32(run.problem, exact_options, exact_f32); !status.ok()) {
    return Finding{"reference/rejected-valid-case", fmt::format("exact model: {}", status.ToString())};
  }
  for (int g = 0; g < c.groups; ++g) {
    for (int column = 0; column < c.n && c.row_offsets[g] < c.row_offsets[g + 1]; ++column) {
      const std::vector<uint16_t> weights = WeightColumn(c, run.options.transform, c.row_offsets[g], column);
      for (int row = c.row_offsets[g]; row < c.row_offsets[g + 1]; ++row) {
        if (CheckResult finding = CheckElementBound(c, run, exact_f32, weights, ElementIndex{row, column})) {
          return finding;
        }
      }
    }
  }
  return std::nullopt;
}

// The same partition under another tactic: identical bits.
CheckResult CheckPartitionBits(const FuzzCase& c, const ReferenceRun& run) {
  ReferenceOptions other_options = run.options;
  other_options.tactic = SamePartitionTactic(c);
  std::vector<uint32_t> other_f32;
  if (absl::Status status = ReferenceGemmF32(run.problem, other_options, other_f32); !status.ok()) {
    return Finding{"reference/rejected-valid-case", fmt::format("tactic {}: {}", TacticName(other_options.tactic),
                                                                status.ToString())};
  }
  for (size_t flat = 0; flat < run.elements; ++flat) {
    if (other_f32[flat] != run.out_f32[flat]) {
      const ElementIndex e{int(flat / size_t(c.n)), int(flat % size_t(c.n))};
      return Finding{fmt::format("reference/partition-bits/{}", StepModelName(c.model)),
                     fmt::format("{}: tactic {} gives 0x{:08x}, tactic {} with the same split partition gives "
                                 "0x{:08x}; {}",
                                 ElementText(c, e), TacticName(c.tactic), run.out_f32[flat],
                                 TacticName(other_options.tactic), other_f32[flat], run.setting)};
    }
  }
  return std::nullopt;
}

// The checks on the reference's run, in the order they run (each after the run succeeded).
using RunCheck = CheckResult (*)(const FuzzCase&, const ReferenceRun&);
constexpr std::pair<std::string_view, RunCheck> kRunChecks[] = {
    {"fast-vs-scalar", CheckFastVsScalar},
    {"recompute", CheckRecompute},
    {"exact-bound", CheckExactBound},
    {"partition-bits", CheckPartitionBits},
};

}  // namespace

std::vector<std::string_view> ReferenceCheckNames() {
  std::vector<std::string_view> names = {"independent-arithmetic", "plan", "reference-run"};
  for (const auto& check : kRunChecks) names.push_back(check.first);
  return names;
}

std::vector<Finding> ReferenceFindings(const FuzzCase& c) {
  std::vector<Finding> findings;
  if (CheckResult finding = CheckAgainstIndependentArithmetic(c)) findings.push_back(*finding);
  CountPlan(c.k, c.tactic.cta_k, c.tactic.splits);
  if (CheckResult finding = CheckPlan(c.k, c.tactic)) findings.push_back(*finding);
  if (c.rows() == 0) return findings;
  ReferenceRun run;
  if (CheckResult finding = RunReference(c, run)) {
    findings.push_back(*finding);
    return findings;
  }
  for (const auto& [name, check] : kRunChecks) {
    if (CheckResult finding = check(c, run)) findings.push_back(*finding);
  }
  return findings;
}

CheckResult CheckReferenceCase(const FuzzCase& c) {
  const std::vector<Finding> findings = ReferenceFindings(c);
  return findings.empty() ? std::nullopt : CheckResult(findings.front());
}

}  // namespace mxdiff::fuzz
