// The reference GEMM (docs/numerics.md: reduction order): per output element and split, an accumulator from +0
// stepping over ascending k four at a time; splits reduced serially in order; the last fp32
// value rounded to fp16. The scalar path below is the definition; gemm_fast_avx2.cc computes
// the same bits eight columns at a time.
#include "reference/reference_gemm.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <thread>

#include "fmt/core.h"
#include "reference/fp16.h"
#include "reference/gemm_plan.h"
#include "reference/split_plan.h"
#include "reference/status_macros.h"

namespace mxdiff {
namespace internal {

static DequantTable BuildDequantTable(Transform transform) {
  DequantTable table;
  for (int raw = 0; raw < 256; ++raw) {
    const uint16_t scale = prepared_scale(transform, uint8_t(raw));
    for (int code = 0; code < 16; ++code) {
      const uint16_t weight = dequantize(transform, uint8_t(code), scale);
      table.f16[raw * 16 + code] = weight;
      table.f32[raw * 16 + code] = f16_to_f32(weight);
      table.v100_field[raw * 16 + code] = V100Field(weight);
    }
  }
  // The AVX-512 path's plain scale bytes (gemm_plan.h), derived from the values above.
  for (int raw = 0; raw < 256; ++raw) {
    const float scale = table.f32[raw * 16 + 2];  // code 2 is the value 1
    const int32_t shift = table.v100_field[raw * 16 + 2] - 127;
    bool plain_value = true, plain_field = true;
    for (int code = 0; code < 16; ++code) {
      const float weight = table.f32[raw * 16 + code];
      plain_value &= f32_to_bits(weight) == f32_to_bits(kE2m1.value[code] * scale);
      if ((table.f16[raw * 16 + code] & 0x7FFF) != 0)
        plain_field &= table.v100_field[raw * 16 + code] == kE2m1.field[code] + shift;
      else
        plain_field &= (kE2m1.field[code] + shift) < 0;  // a zero weight's product is skipped
    }
    table.wide.scale[raw] = scale;
    table.wide.field_shift[raw] = shift;
    table.wide.not_plain[raw] =
        (plain_value ? 0 : kNotPlainValue | kNotPlainV100) | (plain_field ? 0 : kNotPlainV100);
  }
  // The ranges the vector code checks (gemm_plan.h: WideTables).
  table.wide.zero_scale_at_a0 = transform == Transform::kOrdinary;
  bool value_ok[256], v100_ok[256];
  for (int raw = 0; raw < 256; ++raw) {
    value_ok[raw] = (table.wide.not_plain[raw] & kNotPlainValue) == 0 &&
                    f32_to_bits(table.wide.scale[raw]) == WideScaleBits(raw, table.wide.zero_scale_at_a0);
    v100_ok[raw] = value_ok[raw] && (table.wide.not_plain[raw] & kNotPlainV100) == 0 &&
                   table.wide.field_shift[raw] == WideFieldShift(raw);
  }
  const auto range = [](const bool (&ok)[256], uint8_t& low, uint8_t& high) {
    if (!ok[127]) {
      low = 1, high = 0;
      return;
    }
    int l = 127, h = 127;
    while (l > 0 && ok[l - 1]) --l;
    while (h < 255 && ok[h + 1]) ++h;
    low = uint8_t(l), high = uint8_t(h);
  };
  range(value_ok, table.wide.plain_low, table.wide.plain_high);
  range(v100_ok, table.wide.v100_low, table.wide.v100_high);
  return table;
}

const DequantTable& DequantTableFor(Transform transform) {
  static const DequantTable ordinary = BuildDequantTable(Transform::kOrdinary);
  static const DequantTable folded = BuildDequantTable(Transform::kFolded);
  return transform == Transform::kOrdinary ? ordinary : folded;
}

GemmPlan BuildGemmPlan(const GroupedProblem& problem, Transform transform, StepModel model,
                       const Tactic& tactic) {
  GemmPlan plan;
  plan.problem = &problem;
  plan.model = model;
  const int splits = effective_splits(problem.k, tactic.cta_k, tactic.splits);
  for (int s = 0; s < splits; ++s)
    plan.splits.push_back(split_k_range(problem.k, tactic.cta_k, tactic.splits, s));
  plan.weights = &DequantTableFor(transform);
  const size_t count = problem.activations.size();
  plan.activation_f32.resize(count);
  plan.activation_v100_exponent.resize(count);
  for (size_t i = 0; i < count; ++i) {
    const float value = f16_to_f32(problem.activations[i]);
    plan.activation_f32[i] = value;
    plan.activation_v100_exponent[i] = std::max<int32_t>((f32_to_bits(value) >> 23) & 0xFF, 113);
  }
  if (model == StepModel::kV100) {
    plan.activation_v100_field.resize(count);
    for (size_t i = 0; i < count; ++i) plan.activation_v100_field[i] = V100Field(problem.activations[i]);
  }
  return plan;
}

FastInputs MakeFastInputs(const GemmPlan& plan) {
  const GroupedProblem& problem = *plan.problem;
  return FastInputs{plan.model,
                    problem.n,
                    problem.k,
                    problem.row_offsets.data(),
                    plan.splits.data(),
                    int(plan.splits.size()),
                    problem.packed_codes.data(),
                    problem.scale_bytes.data(),
                    plan.weights->f32.data(),
                    plan.activation_f32.data(),
                    plan.activation_v100_exponent.data(),
                    problem.activations.data(),
                    plan.weights->v100_field.data(),
                    &plan.weights->wide,
                    plan.activation_v100_field.data()};
}

}  // namespace internal

namespace {

using internal::GemmPlan;

// Below this many multiply-adds a call runs on the calling thread: starting threads would cost
// more than the work (fuzzers call the oracle on many small problems).
constexpr double kMinMacsPerThread = 1 << 18;

int ThreadCount(int requested, int items, double macs) {
  const int hardware = int(std::max(1u, std::thread::hardware_concurrency()));
  int threads = requested > 0 ? requested : std::min(hardware, int(macs / kMinMacsPerThread) + 1);
  return std::max(1, std::min(threads, items));
}

// Runs work(item, worker) for items [0, count) on `threads` threads, items handed out in order.
void ParallelFor(int count, int threads, const std::function<void(int item, int worker)>& work) {
  if (threads <= 1) {
    for (int item = 0; item < count; ++item) work(item, 0);
    return;
  }
  std::atomic<int> next{0};
  const auto run = [&](int worker) {
    for (int item = next++; item < count; item = next++) work(item, worker);
  };
  // The calling thread is worker 0: one thread fewer to start per call.
  std::vector<std::thread> pool;
  for (int worker = 1; worker < threads; ++worker) pool.emplace_back(run, worker);
  run(0);
  for (std::thread& thread : pool) thread.join();
}

// Weights of column n of `group` over all k, as fp16 bits.
void DequantizeColumn(const GemmPlan& plan, int group, int n, std::vector<uint16_t>& weights) {
  const GroupedProblem& problem = *plan.problem;
  const int k = problem.k;
  weights.resize(size_t(k));
  const uint8_t* codes =
      problem.packed_codes.data() + size_t(group) * problem.codes_per_group() + size_t(n) * (k / 2);
  const uint8_t* scales =
      problem.scale_bytes.data() + size_t(group) * problem.scales_per_group() + size_t(n) * (k / kBlockK);
  for (int kk = 0; kk < k; ++kk)
    weights[kk] = plan.weights->f16[scales[kk / kBlockK] * 16 + unpack_code(codes, kk)];
}

// One output element by the definition; `trace` (optional) receives every accumulator state.
uint32_t ScalarElement(const GemmPlan& plan, const uint16_t* activations, const uint16_t* weights,
                       std::vector<TraceStep>* trace) {
  uint32_t reduced = 0;
  for (int split = 0; split < int(plan.splits.size()); ++split) {
    const KRange range = plan.splits[split];
    uint32_t acc = 0;  // +0
    for (int k = range.begin; k < range.end; k += 4) {
      acc = Step(plan.model, acc, std::span<const uint16_t, 4>(activations + k, 4),
                 std::span<const uint16_t, 4>(weights + k, 4));
      if (trace != nullptr) trace->push_back(TraceStep{split, k, acc});
    }
    if (split == 0) {
      reduced = acc;
    } else {
      reduced = ReduceAdd(plan.model, reduced, acc);
      if (trace != nullptr) trace->push_back(TraceStep{split, -1, reduced});
    }
  }
  return reduced;
}

}  // namespace

absl::Status ValidateReferenceInputs(const GroupedProblem& problem, const ReferenceOptions& options) {
  MXDIFF_RETURN_IF_ERROR(ValidateProblem(problem));
  MXDIFF_RETURN_IF_ERROR(ValidateTactic(options.tactic));
  if (int(options.model) >= kStepModelCount) {
    return absl::InvalidArgumentError(fmt::format("unknown step model {}", int(options.model)));
  }
  if (int(options.transform) >= kTransformCount) {
    return absl::InvalidArgumentError(fmt::format("unknown transform {}", int(options.transform)));
  }
  // The output (and the work list) can be far larger than the inputs; refuse instead of failing
  // an allocation.
  constexpr double kMaxElements = double(1u << 31);
  if (double(problem.rows()) * problem.n > kMaxElements || double(problem.groups) * problem.n > kMaxElements) {
    return absl::ResourceExhaustedError(fmt::format("{} rows x {} columns ({} groups) exceed the reference's "
                                                    "limit of 2^31 outputs",
                                                    problem.rows(), problem.n, problem.groups));
  }
  return absl::OkStatus();
}

bool ReferenceFastPathAvailable() { return internal::FastPathSupportedByCpu(); }
bool ReferenceAvx512PathAvailable() { return internal::Avx512PathSupportedByCpu(); }

namespace {

// The largest group's row count: the per-thread accumulator state is sized by it.
int MaxGroupRows(const GroupedProblem& problem) {
  int max_rows = 0;
  for (int g = 0; g < problem.groups; ++g)
    max_rows = std::max(max_rows, problem.row_offsets[g + 1] - problem.row_offsets[g]);
  return max_rows;
}

// Work items of `columns` columns of one group (empty groups skipped), each worker with its own
// scratch, sized by `size_scratch(scratch, max_group_rows)`; `run_block(inputs, group,
// first_column, scratch)` computes one.
template <typename Scratch, typename SizeScratch, typename RunBlock>
void RunColumnBlocks(const GemmPlan& plan, const ReferenceOptions& options, double macs, int columns,
                     SizeScratch size_scratch, RunBlock run_block) {
  const GroupedProblem& problem = *plan.problem;
  const int blocks_per_group = (problem.n + columns - 1) / columns;
  const int items = problem.groups * blocks_per_group;
  const int threads = ThreadCount(options.threads, items, macs);
  const int max_rows = MaxGroupRows(problem);
  std::vector<Scratch> scratch(threads);
  for (Scratch& buffers : scratch) size_scratch(buffers, max_rows);
  const internal::FastInputs inputs = internal::MakeFastInputs(plan);
  ParallelFor(items, threads, [&](int item, int worker) {
    const int group = item / blocks_per_group;
    if (problem.row_offsets[group + 1] == problem.row_offsets[group]) return;
    run_block(inputs, group, (item % blocks_per_group) * columns, scratch[worker]);
  });
}

// The AVX-512 path: work items of kWideColumns columns of one group.
void RunWidePath(const GemmPlan& plan, const ReferenceOptions& options, double macs, std::vector<uint32_t>& output) {
  constexpr int kColumns = internal::kWideColumns;
  struct Scratch {
    std::vector<uint8_t> panel, scales;
    std::vector<float> state;
    internal::WideScratch View() {
      void* aligned = panel.data() + (64 - reinterpret_cast<uintptr_t>(panel.data()) % 64) % 64;
      return internal::WideScratch{aligned, scales.data(), state.data()};
    }
  };
  const int k = plan.problem->k;
  RunColumnBlocks<Scratch>(
      plan, options, macs, kColumns,
      [k](Scratch& buffers, int max_rows) {
        buffers.panel.resize(internal::kWidePanelBytes + 64);
        buffers.scales.resize(size_t(k / kBlockK) * kColumns);
        buffers.state.resize(size_t(max_rows) * internal::kWideVectors * 2 * internal::kWideLanes);
      },
      [&output](const internal::FastInputs& inputs, int group, int column, Scratch& buffers) {
        internal::RunWideColumnBlock(inputs, group, column, buffers.View(), output.data());
      });
}

// The AVX2 path: work items of kFastLanes columns of one group.
void RunFastPath(const GemmPlan& plan, const ReferenceOptions& options, double macs, std::vector<uint32_t>& output) {
  constexpr int kLanes = internal::kFastLanes;
  struct Scratch {
    std::vector<float> panel, state;
  };
  RunColumnBlocks<Scratch>(
      plan, options, macs, kLanes,
      [](Scratch& buffers, int max_rows) {
        buffers.panel.resize(internal::kFastPanelK * kLanes);
        buffers.state.resize(size_t(max_rows) * 2 * kLanes);
      },
      [&output](const internal::FastInputs& inputs, int group, int column, Scratch& buffers) {
        internal::RunFastColumnBlock(inputs, group, column, buffers.panel.data(), buffers.state.data(), output.data());
      });
}

// The definition: one work item per (group, column), every element by ScalarElement.
void RunScalarPath(const GemmPlan& plan, const ReferenceOptions& options, double macs, std::vector<uint32_t>& output) {
  const GroupedProblem& problem = *plan.problem;
  const int items = problem.groups * problem.n;
  const int threads = ThreadCount(options.threads, items, macs);
  std::vector<std::vector<uint16_t>> weights(threads);
  ParallelFor(items, threads, [&](int item, int worker) {
    const int group = item / problem.n;
    const int n = item % problem.n;
    const int row_begin = problem.row_offsets[group];
    const int row_end = problem.row_offsets[group + 1];
    if (row_begin == row_end) return;
    DequantizeColumn(plan, group, n, weights[worker]);
    for (int row = row_begin; row < row_end; ++row) {
      output[size_t(row) * size_t(problem.n) + size_t(n)] =
          ScalarElement(plan, problem.activations.data() + size_t(row) * size_t(problem.k),
                        weights[worker].data(), nullptr);
    }
  });
}

}  // namespace

absl::Status ReferenceGemmF32(const GroupedProblem& problem, const ReferenceOptions& options,
                              std::vector<uint32_t>& output) {
  MXDIFF_RETURN_IF_ERROR(ValidateReferenceInputs(problem, options));
  const bool fast_available = internal::FastPathSupportedByCpu();
  if ((options.path == ReferencePath::kFast || options.path == ReferencePath::kFastAvx2) && !fast_available) {
    return absl::UnimplementedError("the fast reference path needs a CPU with AVX2 and FMA");
  }
  const bool fast = options.path != ReferencePath::kScalar && fast_available;
  // The AVX-512 path where the CPU has it, for every model but exact (whose steps are scalar
  // per lane on either path); kFastAvx2 keeps the AVX2 path.
  const bool wide = fast && options.path != ReferencePath::kFastAvx2 && options.model != StepModel::kExact &&
                    internal::Avx512PathSupportedByCpu();
  const GemmPlan plan = internal::BuildGemmPlan(problem, options.transform, options.model, options.tactic);
  output.assign(size_t(problem.rows()) * size_t(problem.n), 0);
  const double macs = double(problem.rows()) * problem.n * problem.k;
  if (wide) {
    RunWidePath(plan, options, macs, output);
  } else if (fast) {
    RunFastPath(plan, options, macs, output);
  } else {
    RunScalarPath(plan, options, macs, output);
  }
  return absl::OkStatus();
}

absl::Status ReferenceGemm(const GroupedProblem& problem, const ReferenceOptions& options,
                           std::vector<uint16_t>& output) {
  std::vector<uint32_t> f32;
  MXDIFF_RETURN_IF_ERROR(ReferenceGemmF32(problem, options, f32));
  output.resize(f32.size());
  for (size_t i = 0; i < f32.size(); ++i) output[i] = f32_to_f16_rne(bits_to_f32(f32[i]));
  return absl::OkStatus();
}

absl::StatusOr<ElementTrace> TraceElement(const GroupedProblem& problem, const ReferenceOptions& options,
                                          int row, int column) {
  MXDIFF_RETURN_IF_ERROR(ValidateReferenceInputs(problem, options));
  if (row < 0 || row >= problem.rows()) {
    return absl::OutOfRangeError(fmt::format("row {} outside [0, {})", row, problem.rows()));
  }
  if (column < 0 || column >= problem.n) {
    return absl::OutOfRangeError(fmt::format("column {} outside [0, {})", column, problem.n));
  }
  int group = 0;
  while (problem.row_offsets[group + 1] <= row) ++group;
  const GemmPlan plan = internal::BuildGemmPlan(problem, options.transform, options.model, options.tactic);
  std::vector<uint16_t> weights;
  DequantizeColumn(plan, group, column, weights);
  ElementTrace trace;
  trace.result_f32 = ScalarElement(plan, problem.activations.data() + size_t(row) * size_t(problem.k),
                                   weights.data(), &trace.steps);
  trace.result_f16 = f32_to_f16_rne(bits_to_f32(trace.result_f32));
  return trace;
}

}  // namespace mxdiff
