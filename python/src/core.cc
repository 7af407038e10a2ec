// mxdiff._core: the C++ libraries of this repository behind Python (python/README.md). Every rule
// (transforms, admission, the audit, the oracle, the error bound, the case format) is the C++
// one, called; nothing here decides anything the C++ tools decide otherwise. Arrays cross as
// nanobind ndarrays: NumPy arrays and (CPU) PyTorch tensors through DLPack, read in place.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/audit.h"
#include "fuzz/formats/case_format.h"
#include "fuzz/formats/tensor_recipe.h"
#include "kernels/route.h"
#include "reference/admission.h"
#include "reference/hash.h"
#include "reference/error_bound.h"
#include "reference/fp16.h"
#include "reference/mx_spec.h"
#include "reference/problem.h"
#include "reference/reference_gemm.h"
#include "reference/split_plan.h"
#include "reference/step_model.h"
#include "reference/transform.h"
#include "tools/cli/input_file.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace mxdiff::python {
namespace {

using AnyArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;
template <typename T>
using OutArray = nb::ndarray<nb::numpy, T>;

void Check(const absl::Status& status) {
  if (!status.ok()) throw nb::value_error(std::string(status.message()).c_str());
}

// A NumPy array owning `values` (moved to the heap, freed with the array).
template <typename T>
OutArray<T> Owned(std::vector<T>&& values, std::initializer_list<size_t> shape) {
  auto* heap = new std::vector<T>(std::move(values));
  nb::capsule owner(heap, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return OutArray<T>(heap->data(), shape.size(), shape.begin(), owner);
}

bool IsDtype(const AnyArray& array, nb::dlpack::dtype_code code, int bits) {
  const nb::dlpack::dtype dtype = array.dtype();
  return dtype.code == uint8_t(code) && dtype.bits == bits && dtype.lanes == 1;
}

// fp16 values or their uint16 bits, read in place.
std::span<const uint16_t> F16Span(const AnyArray& array, const char* what) {
  if (!IsDtype(array, nb::dlpack::dtype_code::Float, 16) && !IsDtype(array, nb::dlpack::dtype_code::UInt, 16) &&
      !IsDtype(array, nb::dlpack::dtype_code::Int, 16)) {
    throw nb::type_error((std::string(what) + ": expected float16 (or its uint16 bits)").c_str());
  }
  return {static_cast<const uint16_t*>(array.data()), array.size()};
}

std::span<const uint8_t> U8Span(const AnyArray& array, const char* what) {
  if (!IsDtype(array, nb::dlpack::dtype_code::UInt, 8) && !IsDtype(array, nb::dlpack::dtype_code::Int, 8)) {
    throw nb::type_error((std::string(what) + ": expected uint8").c_str());
  }
  return {static_cast<const uint8_t*>(array.data()), array.size()};
}

std::span<const int32_t> I32Span(const AnyArray& array, const char* what) {
  if (!IsDtype(array, nb::dlpack::dtype_code::Int, 32)) {
    throw nb::type_error((std::string(what) + ": expected int32").c_str());
  }
  return {static_cast<const int32_t*>(array.data()), array.size()};
}

Transform ParseTransform(std::string_view name) {
  if (name == "ordinary") return Transform::kOrdinary;
  if (name == "folded") return Transform::kFolded;
  throw nb::value_error(("unknown transform '" + std::string(name) + "' (ordinary, folded)").c_str());
}

StepModel ParseModel(std::string_view name) {
  if (std::optional<StepModel> model = ParseStepModel(name)) return *model;
  throw nb::value_error(
      ("unknown model '" + std::string(name) + "' (v100, sm90-emulated, sm90-emulated-ftz, exact)").c_str());
}

TransformRequest ParseRequest(std::string_view name) {
  for (TransformRequest request : {TransformRequest::kOrdinary, TransformRequest::kFolded, TransformRequest::kAuto}) {
    if (TransformRequestName(request) == name) return request;
  }
  throw nb::value_error(("unknown transform request '" + std::string(name) + "' (ordinary, folded, auto)").c_str());
}

fuzz::ValueClass ParseValueClass(fuzz::TensorKind kind, std::string_view name) {
  for (int i = 0; i < fuzz::kValueClassCount; ++i) {
    const fuzz::ValueClass value_class = fuzz::ValueClass(i);
    if (fuzz::ValueClassName(value_class) == name && fuzz::ValueClassAllowed(kind, value_class)) return value_class;
  }
  throw nb::value_error(
      ("value class '" + std::string(name) + "' is not one of " + fuzz::TensorKindName(kind)).c_str());
}

std::string ShapeText(const size_t* shape, size_t ndim) {
  std::string text = "(";
  for (size_t i = 0; i < ndim; ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + (ndim == 1 ? ",)" : ")");
}

// ValueError "<what>: shape (8, 16) is not [rows, k] = (16, 8)" unless `array` has `expected`.
void CheckShape(const AnyArray& array, const char* what, const char* layout, std::initializer_list<size_t> expected) {
  std::vector<size_t> shape(array.ndim());
  for (size_t i = 0; i < array.ndim(); ++i) shape[i] = array.shape(i);
  if (std::equal(shape.begin(), shape.end(), expected.begin(), expected.end())) return;
  throw nb::value_error((std::string(what) + ": shape " + ShapeText(shape.data(), shape.size()) + " is not " + layout +
                         " = " + ShapeText(expected.begin(), expected.size()))
                            .c_str());
}

GroupedProblem MakeProblem(const AnyArray& activations, const AnyArray& codes, const AnyArray& scales,
                           const AnyArray& row_offsets, int n, int k) {
  GroupedProblem problem;
  problem.row_offsets = I32Span(row_offsets, "row_offsets");
  problem.groups = int(problem.row_offsets.size()) - 1;
  problem.n = n;
  problem.k = k;
  problem.activations = F16Span(activations, "activations");
  problem.packed_codes = U8Span(codes, "codes");
  problem.scale_bytes = U8Span(scales, "scales");
  if (problem.groups < 1) throw nb::value_error("row_offsets: needs groups + 1 >= 2 entries");
  Check(ValidateProblem(problem));
  // The sizes match; the shapes must too, or a transposed array of the same size would be read
  // as if it were in the documented layout.
  const size_t groups = size_t(problem.groups), rows = size_t(problem.rows());
  CheckShape(row_offsets, "row_offsets", "[groups + 1]", {groups + 1});
  CheckShape(activations, "activations", "[rows, k]", {rows, size_t(k)});
  CheckShape(codes, "codes", "[groups, n, k/2]", {groups, size_t(n), size_t(k) / 2});
  CheckShape(scales, "scales", "[groups, n, k/32]", {groups, size_t(n), size_t(k) / kBlockK});
  return problem;
}

ReferenceOptions MakeOptions(std::string_view transform, std::string_view model, int cta_k, int splits,
                             int threads) {
  ReferenceOptions options;
  options.transform = ParseTransform(transform);
  options.model = ParseModel(model);
  options.tactic.cta_k = cta_k;
  options.tactic.splits = splits;
  options.threads = threads;
  return options;
}

// The largest fp16 <= x and the smallest fp16 >= x (x finite double), as bits.
uint16_t F16Down(uint16_t h) { return h == 0x0000 ? 0x8001 : (h & 0x8000) ? uint16_t(h + 1) : uint16_t(h - 1); }
uint16_t F16Up(uint16_t h) { return h == 0x8000 ? 0x0001 : (h & 0x8000) ? uint16_t(h - 1) : uint16_t(h + 1); }
double F16Value(uint16_t h) { return double(f16_to_f32(h)); }
uint16_t F16Floor(double x) {
  uint16_t h = f32_to_f16_rne(float(x));
  while (F16Value(h) > x) h = F16Down(h);
  return h;
}
uint16_t F16Ceil(double x) {
  uint16_t h = f32_to_f16_rne(float(x));
  while (F16Value(h) < x) h = F16Up(h);
  return h;
}

// The transform bound mode judges against: one of the kernels' (reference/transform.h) or the
// OCP MX specification's own element values ("mx-spec", reference/mx_spec.h), whose weights need
// not be fp16 values (docs/numerics.md: "The MX specification as the contract").
constexpr std::string_view kMxSpecTransform = "mx-spec";

// Every weight's value by (raw scale, code) under `transform_name`, as doubles: 256 x 16 (exact:
// fp16 values, or the spec's e2m1 x 2^(raw - 127), NaN for raw 0xFF).
std::vector<double> WeightValues(std::string_view transform_name) {
  const bool spec = transform_name == kMxSpecTransform;
  const Transform transform = spec ? Transform::kOrdinary : ParseTransform(transform_name);
  std::vector<double> table(256 * 16);
  for (int raw = 0; raw < 256; ++raw) {
    for (uint8_t code = 0; code < 16; ++code) {
      table[size_t(raw) * 16 + code] =
          spec ? MxSpecElement(code, uint8_t(raw)).ToDouble()
               : F16Value(dequantize(transform, code, prepared_scale(transform, uint8_t(raw))));
    }
  }
  return table;
}

// work(item, scratch) for every item in [0, items), on up to `most_threads` threads (and no more
// than the hardware has), each with its own scratch of `scratch_size` doubles.
void ForEachItem(size_t items, size_t most_threads, size_t scratch_size,
                 const std::function<void(size_t, std::vector<double>&)>& work) {
  const size_t hardware = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = std::max<size_t>(1, std::min({items, hardware, most_threads}));
  std::atomic<size_t> next{0};
  const auto run = [&] {
    std::vector<double> scratch(scratch_size);
    for (size_t item = next++; item < items; item = next++) work(item, scratch);
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(run);
  run();
  for (std::thread& thread : pool) thread.join();
}

// Bound mode (python/README.md): each fp16 output against the centre and the proven bound of
// reference/error_bound.h, widened to the fp16 values around it, judged by BoundVerdict. The
// centre is the exact model's fp32 value under a kernels' transform, and the real sum (in double,
// its own error added to the bound) under "mx-spec", whose weights the step models cannot hold.
// Status per element: BoundStatus (0 within, 1 outside the bound, 2 a special not kept).
nb::tuple BoundVerdicts(const AnyArray& activations, const AnyArray& codes, const AnyArray& scales,
                        const AnyArray& row_offsets, int n, int k, std::string_view transform_name,
                        const AnyArray& output, int bound_splits) {
  const GroupedProblem problem = MakeProblem(activations, codes, scales, row_offsets, n, k);
  const std::span<const uint16_t> out = F16Span(output, "output");
  const size_t rows = size_t(problem.rows()), elements = rows * size_t(n);
  if (out.size() != elements) throw nb::value_error("output: size is not rows x n");
  const bool spec = transform_name == kMxSpecTransform;
  ReferenceOptions options;
  if (!spec) options.transform = ParseTransform(transform_name);
  options.model = StepModel::kExact;
  std::vector<uint32_t> exact_f32;
  std::vector<uint8_t> status(elements, 0);
  std::vector<double> low(elements), high(elements), exact(elements);
  {
    nb::gil_scoped_release release;
    if (!spec) Check(ReferenceGemmF32(problem, options, exact_f32));
    // The activations as doubles once (not once per column), then each (group, column) on its
    // own: its weights dequantized once, every row of the group against them. Columns are
    // independent and each writes only its own elements, so they run on all hardware threads;
    // the sums run in k order as before, so every verdict and limit is the same bits.
    std::vector<double> activations(problem.activations.size());
    for (size_t i = 0; i < activations.size(); ++i) activations[i] = F16Value(problem.activations[i]);
    const std::vector<double> table = WeightValues(transform_name);
    std::vector<int> groups;  // the groups with rows: an empty one has no element to judge
    for (int g = 0; g < problem.groups; ++g) {
      if (problem.row_offsets[g] < problem.row_offsets[g + 1]) groups.push_back(g);
    }
    const size_t items = groups.size() * size_t(n);
    const auto judge = [&](size_t item, std::vector<double>& weights) {
      const int g = groups[item / size_t(n)], column = int(item % size_t(n));
      const int first = problem.row_offsets[g], last = problem.row_offsets[g + 1];
      const uint8_t* packed = problem.packed_codes.data() + (size_t(g) * n + column) * size_t(k) / 2;
      const uint8_t* raws = problem.scale_bytes.data() + (size_t(g) * n + column) * size_t(k) / kBlockK;
      for (int kk = 0; kk < k; ++kk) weights[kk] = table[size_t(raws[kk / kBlockK]) * 16 + unpack_code(packed, kk)];
      for (int row = first; row < last; ++row) {
        const double* a = activations.data() + size_t(row) * size_t(k);
        ElementProducts products;
        for (int kk = 0; kk < k; ++kk) products.Add(a[kk], weights[kk]);
        const size_t flat = size_t(row) * size_t(n) + size_t(column);
        const double got = F16Value(out[flat]);
        exact[flat] = spec ? products.sum : double(bits_to_f32(exact_f32[flat]));
        double bound = ModelErrorBound(products.abs_sum, k / 4, bound_splits);
        if (spec) bound += products.DoubleSumError();
        if (products.nan || products.plus_inf || products.minus_inf) {
          const double real = products.nan || (products.plus_inf && products.minus_inf) ? NAN
                              : products.plus_inf                                       ? INFINITY
                                                                                        : -INFINITY;
          low[flat] = high[flat] = exact[flat] = real;
        } else {
          low[flat] = F16Value(F16Floor(exact[flat] - bound));
          high[flat] = F16Value(F16Ceil(exact[flat] + bound));
        }
        status[flat] = uint8_t(BoundVerdict(products, bound, low[flat], high[flat], got));
      }
    };
    const double macs = double(rows) * double(n) * double(k);
    ForEachItem(items, size_t(macs / (1 << 20)) + 1, size_t(k), judge);
  }
  return nb::make_tuple(Owned(std::move(status), {rows, size_t(n)}), Owned(std::move(exact), {rows, size_t(n)}),
                        Owned(std::move(low), {rows, size_t(n)}), Owned(std::move(high), {rows, size_t(n)}));
}

// ReferenceGemm (fp16 bits) or ReferenceGemmF32 (fp32 bits) on arrays, without the GIL.
template <typename Bits, absl::Status (*Gemm)(const GroupedProblem&, const ReferenceOptions&, std::vector<Bits>&)>
OutArray<Bits> RunReferenceWith(const AnyArray& activations, const AnyArray& codes, const AnyArray& scales,
                                const AnyArray& row_offsets, int n, int k, std::string_view transform,
                                std::string_view model, int cta_k, int splits, int threads) {
  const GroupedProblem problem = MakeProblem(activations, codes, scales, row_offsets, n, k);
  const ReferenceOptions options = MakeOptions(transform, model, cta_k, splits, threads);
  std::vector<Bits> output;
  {
    nb::gil_scoped_release release;
    Check(Gemm(problem, options, output));
  }
  return Owned(std::move(output), {size_t(problem.rows()), size_t(n)});
}

// E2M1: code -> value; value -> the nearest code (ties to the even code, beyond +-6 saturating,
// the sign kept, so -0.0 is code 8).
OutArray<float> E2m1Decode(const AnyArray& codes) {
  const std::span<const uint8_t> in = U8Span(codes, "codes");
  std::vector<float> out(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    out[i] = std::copysign(float(std::abs(E2m1Halves(in[i] & 0xF))) / 2.0f, (in[i] & 0x8) ? -1.0f : 1.0f);
  }
  return Owned(std::move(out), {in.size()});
}

OutArray<uint8_t> E2m1Encode(const nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu, double>& values) {
  const double* in = values.data();
  std::vector<uint8_t> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const double x = in[i];
    if (std::isnan(x)) throw nb::value_error("e2m1_encode: NaN has no E2M1 code");
    const double magnitude = std::fabs(x);
    int best = 0;
    for (int code = 1; code < 8; ++code) {
      const double d = std::fabs(E2m1Halves(uint8_t(code)) / 2.0 - magnitude),
                   best_d = std::fabs(E2m1Halves(uint8_t(best)) / 2.0 - magnitude);
      if (d < best_d || (d == best_d && (code & 1) == 0)) best = code;
    }
    out[i] = uint8_t(best | (std::signbit(x) ? 0x8 : 0));
  }
  return Owned(std::move(out), {values.size()});
}

// E8M0: raw -> 2^(raw - 127), raw 255 NaN; value -> the raw of the largest power of two <= it
// (NaN and +Inf: 255; clamped to 0..254).
OutArray<double> E8m0Decode(const AnyArray& raws) {
  const std::span<const uint8_t> in = U8Span(raws, "scales");
  std::vector<double> out(in.size());
  for (size_t i = 0; i < in.size(); ++i) out[i] = in[i] == 0xFF ? std::nan("") : std::ldexp(1.0, int(in[i]) - 127);
  return Owned(std::move(out), {in.size()});
}

OutArray<uint8_t> E8m0Encode(const nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu, double>& values) {
  std::vector<uint8_t> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const double x = values.data()[i];
    if (std::isnan(x) || x == INFINITY) {
      out[i] = 0xFF;
      continue;
    }
    if (!(x > 0.0)) throw nb::value_error("e8m0_encode: a scale must be positive");
    const int exponent = std::ilogb(x);
    out[i] = uint8_t(std::clamp(exponent + 127, 0, 254));
  }
  return Owned(std::move(out), {values.size()});
}

// dequantize(transform, code, prepared_scale(transform, raw)) for every (raw, code): [256, 16]
// fp16 bits, the kernels' contract (reference/transform.h).
OutArray<uint16_t> TransformTable(std::string_view transform_name) {
  const Transform transform = ParseTransform(transform_name);
  std::vector<uint16_t> out(256 * 16);
  for (int raw = 0; raw < 256; ++raw) {
    for (int code = 0; code < 16; ++code) {
      out[size_t(raw) * 16 + size_t(code)] = dequantize(transform, uint8_t(code), prepared_scale(transform, uint8_t(raw)));
    }
  }
  return Owned(std::move(out), {256, 16});
}

// The MX specification's value of every (raw, code): [256, 16] float64, exact (raw 0xFF NaN).
OutArray<double> MxSpecTable() {
  std::vector<double> table = WeightValues(kMxSpecTransform);
  return Owned(std::move(table), {256, 16});
}

// ClassifyAgainstSpec for every (raw, code): [256, 16] SpecDeviation values.
OutArray<uint8_t> SpecDeviationTable(std::string_view transform_name) {
  const Transform transform = ParseTransform(transform_name);
  std::vector<uint8_t> out(256 * 16);
  for (int raw = 0; raw < 256; ++raw) {
    for (int code = 0; code < 16; ++code) {
      out[size_t(raw) * 16 + size_t(code)] = uint8_t(ClassifyAgainstSpec(transform, uint8_t(code), uint8_t(raw)));
    }
  }
  return Owned(std::move(out), {256, 16});
}

OutArray<uint16_t> Dequantize(std::string_view transform_name, const AnyArray& codes, const AnyArray& raws) {
  const Transform transform = ParseTransform(transform_name);
  const std::span<const uint8_t> c = U8Span(codes, "codes"), r = U8Span(raws, "scales");
  if (c.size() != r.size()) throw nb::value_error("dequantize: codes and scales differ in size");
  std::vector<uint16_t> out(c.size());
  for (size_t i = 0; i < c.size(); ++i) out[i] = dequantize(transform, c[i] & 0xF, prepared_scale(transform, r[i]));
  return Owned(std::move(out), {c.size()});
}

nb::dict Admit(const AnyArray& scales, size_t max_reported) {
  const LayerAdmission admission = AdmitLayer(U8Span(scales, "scales"), max_reported);
  nb::list refused;
  for (const RefusedScale& r : admission.refused) refused.append(nb::make_tuple(r.index, r.raw));
  nb::dict result;
  result["admitted"] = admission.admitted;
  result["refused_count"] = admission.refused_count;
  result["refused"] = refused;
  result["description"] = admission.Describe();
  result["rule_version"] = AdmissionRuleVersion();
  return result;
}

// (exit status, report, errors): the errors are the lines `mxdiff audit` prints on stderr (its
// text report only counts them).
nb::tuple Audit(const std::vector<std::string>& paths, bool keep_going, const std::optional<std::string>& pattern,
                bool json) {
  checkpoint::AuditOptions options;
  options.keep_going = keep_going;
  options.selection.pattern = pattern;
  std::string report;
  std::vector<std::string> errors;
  int status = 0;
  {
    nb::gil_scoped_release release;
    const checkpoint::AuditResult result = checkpoint::RunAudit(paths, options);
    report = json ? checkpoint::JsonReport(result) : checkpoint::TextReport(result);
    status = checkpoint::ExitStatus(result);
    for (const checkpoint::AuditError& error : result.errors) errors.push_back(error.message);
    if (const std::optional<checkpoint::NoKernelLayer> no_layer = checkpoint::FindNoKernelLayer(result)) {
      errors.push_back(no_layer->message);
    }
  }
  return nb::make_tuple(status, report, errors);
}

// Cases (fuzz/formats/case_format.h).
nb::bytes Encode(const fuzz::FuzzCase& c) {
  absl::StatusOr<std::vector<uint8_t>> bytes = fuzz::EncodeCase(c);
  Check(bytes.status());
  return nb::bytes(reinterpret_cast<const char*>(bytes->data()), bytes->size());
}

fuzz::FuzzCase Decode(nb::bytes data) {
  absl::StatusOr<fuzz::FuzzCase> c =
      fuzz::DecodeCase(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.c_str()), data.size()));
  Check(c.status());
  return *std::move(c);
}

uint64_t Mix(uint64_t x) {  // SplitMix64's first output for seed x (reference/hash.h)
  return SplitMix64::Finalize(x + SplitMix64::kGamma);
}

// A format-v2 case of this shape whose three tensors are recipes drawn from `seed` (value class,
// rare rate and generator seed, unless a class is named), materialized.
fuzz::FuzzCase Generate(uint64_t seed, int n, int k, const std::vector<int>& rows_per_group,
                        const std::optional<std::string>& activations_class,
                        const std::optional<std::string>& codes_class,
                        const std::optional<std::string>& scales_class, std::string_view model,
                        std::string_view request, int cta_k, int splits) {
  using fuzz::TensorKind;
  using fuzz::ValueClass;
  fuzz::FuzzCase c;
  fuzz::ResizeCase(c, int(rows_per_group.size()), n, k, rows_per_group);
  c.model = ParseModel(model);
  c.request = ParseRequest(request);
  c.tactic.cta_k = cta_k;
  c.tactic.splits = splits;
  static constexpr ValueClass kActivationClasses[] = {ValueClass::kNormal, ValueClass::kNormal, ValueClass::kNarrow,
                                                      ValueClass::kSubnormal, ValueClass::kSpecials,
                                                      ValueClass::kUniform};
  static constexpr ValueClass kCodeClasses[] = {ValueClass::kNormal, ValueClass::kNormal, ValueClass::kUniform,
                                                ValueClass::kNarrow, ValueClass::kSubnormal, ValueClass::kSpecials};
  static constexpr ValueClass kScaleClasses[] = {ValueClass::kCheckpoint, ValueClass::kNormal, ValueClass::kNarrow,
                                                 ValueClass::kSubnormal, ValueClass::kSpecials, ValueClass::kUniform};
  const auto pick = [&](TensorKind kind, const std::optional<std::string>& name, const auto& classes) {
    const uint64_t h = Mix(seed * 3 + uint64_t(kind) + 1);
    fuzz::TensorRecipe recipe;
    recipe.value_class = name ? ParseValueClass(kind, *name) : classes[h % std::size(classes)];
    recipe.rare_log2 = int((h >> 8) % 4) == 0 ? 0 : int(4 + (h >> 16) % 8);
    recipe.seed = Mix(h);
    c.recipe(kind) = recipe;
  };
  pick(TensorKind::kActivations, activations_class, kActivationClasses);
  pick(TensorKind::kCodes, codes_class, kCodeClasses);
  pick(TensorKind::kScales, scales_class, kScaleClasses);
  Check(fuzz::ValidateCase(c));
  fuzz::MaterializeCase(c, 1);
  return c;
}

template <typename T>
nb::ndarray<nb::numpy, T> View(std::vector<T>& values, std::initializer_list<size_t> shape) {
  return nb::ndarray<nb::numpy, T>(values.data(), shape.size(), shape.begin(), nb::handle());
}

// The reference GEMM, its fp32 twin and the bound (reference/).
void BindReference(nb::module_& m) {
  m.def("reference_gemm", &RunReferenceWith<uint16_t, &ReferenceGemm>, "activations"_a, "codes"_a, "scales"_a,
        "row_offsets"_a, "n"_a, "k"_a, "transform"_a, "model"_a, "cta_k"_a, "splits"_a, "threads"_a = 0);
  m.def("reference_gemm_f32", &RunReferenceWith<uint32_t, &ReferenceGemmF32>, "activations"_a, "codes"_a,
        "scales"_a, "row_offsets"_a, "n"_a, "k"_a, "transform"_a, "model"_a, "cta_k"_a, "splits"_a, "threads"_a = 0);
  m.def("bound_verdicts", &BoundVerdicts, "activations"_a, "codes"_a, "scales"_a, "row_offsets"_a, "n"_a, "k"_a,
        "transform"_a, "output"_a, "bound_splits"_a);
  m.def("model_error_bound", &ModelErrorBound, "abs_sum"_a, "steps"_a, "splits"_a);
  m.def("effective_splits", &effective_splits, "k"_a, "cta_k"_a, "splits"_a);
}

// E2M1, E8M0, the transforms' tables and deviations (reference/mx_spec.h, transform.h).
void BindFormats(nb::module_& m) {
  m.def("e2m1_decode", &E2m1Decode, "codes"_a);
  m.def("e2m1_encode", &E2m1Encode, "values"_a);
  m.def("e8m0_decode", &E8m0Decode, "scales"_a);
  m.def("e8m0_encode", &E8m0Encode, "values"_a);
  m.def("transform_table", &TransformTable, "transform"_a);
  m.def("spec_deviation_table", &SpecDeviationTable, "transform"_a);
  m.def("mx_spec_table", &MxSpecTable);
  m.def("spec_deviation_names", [] {
    std::vector<std::string> names;
    for (int i = 0; i < kSpecDeviationCount; ++i) names.emplace_back(SpecDeviationName(SpecDeviation(i)));
    return names;
  });
  m.def("dequantize", &Dequantize, "transform"_a, "codes"_a, "scales"_a);
  m.def("prepared_scale", [](std::string_view t, int raw) { return prepared_scale(ParseTransform(t), uint8_t(raw)); },
        "transform"_a, "raw"_a);
}

// The admission rule and the checkpoint audit.
void BindAdmission(nb::module_& m) {
  m.def("admit", &Admit, "scales"_a, "max_reported"_a = 16);
  m.def("fold_admitted_set", &DescribeFoldAdmittedSet);
  m.def("admission_rule_version", [] { return AdmissionRuleVersion(); });
  m.def("audit", &Audit, "paths"_a, "keep_going"_a = false, "pattern"_a = nb::none(), "json"_a = false);

}

// CaseData: a fuzz_gemm case's fields and tensors (fuzz/formats/case_format.h).
void BindCaseData(nb::module_& m) {
  nb::class_<fuzz::FuzzCase>(m, "CaseData")
      .def_prop_ro("groups", [](const fuzz::FuzzCase& c) { return c.groups; })
      .def_prop_ro("n", [](const fuzz::FuzzCase& c) { return c.n; })
      .def_prop_ro("k", [](const fuzz::FuzzCase& c) { return c.k; })
      .def_prop_ro("rows", &fuzz::FuzzCase::rows)
      .def_prop_ro(
          "row_offsets",
          [](fuzz::FuzzCase& c) { return View(c.row_offsets, {c.row_offsets.size()}); },
          nb::rv_policy::reference_internal)
      .def_prop_ro(
          "activation_bits",
          [](fuzz::FuzzCase& c) { return View(c.activations, {size_t(c.rows()), size_t(c.k)}); },
          nb::rv_policy::reference_internal)
      .def_prop_ro(
          "codes",
          [](fuzz::FuzzCase& c) { return View(c.packed_codes, {size_t(c.groups), size_t(c.n), size_t(c.k) / 2}); },
          nb::rv_policy::reference_internal)
      .def_prop_ro(
          "scales",
          [](fuzz::FuzzCase& c) {
            return View(c.scale_bytes, {size_t(c.groups), size_t(c.n), size_t(c.k) / kBlockK});
          },
          nb::rv_policy::reference_internal)
      .def_prop_rw(
          "model", [](const fuzz::FuzzCase& c) { return std::string(StepModelName(c.model)); },
          [](fuzz::FuzzCase& c, std::string_view name) { c.model = ParseModel(name); })
      .def_prop_rw(
          "request", [](const fuzz::FuzzCase& c) { return std::string(TransformRequestName(c.request)); },
          [](fuzz::FuzzCase& c, std::string_view name) { c.request = ParseRequest(name); })
      .def_prop_rw(
          "cta_k", [](const fuzz::FuzzCase& c) { return c.tactic.cta_k; },
          [](fuzz::FuzzCase& c, int v) { c.tactic.cta_k = v; })
      .def_prop_rw(
          "splits", [](const fuzz::FuzzCase& c) { return c.tactic.splits; },
          [](fuzz::FuzzCase& c, int v) { c.tactic.splits = v; })
      .def_prop_ro("tactic", [](const fuzz::FuzzCase& c) { return TacticName(c.tactic); })
      .def("describe", [](const fuzz::FuzzCase& c) { return fuzz::DescribeCase(c); })
      .def("encode", &Encode)
      .def("copy", [](const fuzz::FuzzCase& c) { return fuzz::FuzzCase(c); })
      // Makes every tensor explicit (byte by byte) where it fits the format, e.g. after the caller
      // edited a materialized tensor in place.
      .def("drop_recipes", [](fuzz::FuzzCase& c) {
        for (auto& recipe : c.recipes) recipe.reset();
        Check(fuzz::ValidateCase(c));
      });
}

// Cases as bytes: decode, shape, generate.
void BindCases(nb::module_& m) {
  m.def("decode_case", &Decode, "data"_a);
  m.def("max_case_bytes", &fuzz::MaxEncodedSize);
  // ValueError for a FIFO or socket (which would block the reader), the tools' rule.
  m.def("refuse_stream_input", [](const std::string& path) { Check(cli::RefuseStreamInput(path)); }, "path"_a);
  // (groups, n, k, rows) of a case without materializing its tensors.
  m.def("case_shape", [](nb::bytes data) {
    fuzz::FuzzCase c;
    Check(fuzz::DecodeCaseInto(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.c_str()), data.size()),
                               c, fuzz::Materialize::kNo));
    return nb::make_tuple(c.groups, c.n, c.k, c.rows());
  }, "data"_a);
  m.def("generate_case", &Generate, "seed"_a, "n"_a, "k"_a, "rows_per_group"_a, "activations"_a = nb::none(),
        "codes"_a = nb::none(), "scales"_a = nb::none(), "model"_a = "sm90-emulated", "request"_a = "ordinary",
        "cta_k"_a = 32, "splits"_a = 1);
}

}  // namespace
}  // namespace mxdiff::python

NB_MODULE(_core, m) {
  using namespace mxdiff::python;
  m.doc() = "mxdiff's C++ oracle, formats, admission rule, audit and case format (python/README.md)";
  BindReference(m);
  BindFormats(m);
  BindAdmission(m);
  BindCaseData(m);
  BindCases(m);
}
