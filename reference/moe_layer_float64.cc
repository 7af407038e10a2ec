#include "reference/moe_layer_float64.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "fmt/core.h"
#include "reference/status_macros.h"

namespace mxdiff {
namespace {

// The fp16 ulp at |value|: 2^(e - 10) with e the exponent, at least the subnormal step 2^-24.
double F16Ulp(double value) {
  int exponent = 0;
  std::frexp(std::fabs(value), &exponent);  // |value| = m 2^exponent, m in [0.5, 1)
  return std::ldexp(1.0, std::max(exponent - 1, -14) - 10);
}

// Dequantized weights of one group of one GEMM as doubles, N x K.
std::vector<double> GroupWeights(const MoeGemmWeights& weights, Transform transform, int group, int n, int k) {
  std::vector<double> out(size_t(n) * size_t(k));
  const size_t codes_per_row = size_t(k) / 2, scales_per_row = size_t(k) / kBlockK;
  for (int row = 0; row < n; ++row) {
    const size_t weight_row = size_t(group) * size_t(n) + size_t(row);
    const uint8_t* codes = weights.codes.data() + weight_row * codes_per_row;
    const uint8_t* scales = weights.scales.data() + weight_row * scales_per_row;
    for (int kk = 0; kk < k; ++kk) {
      const uint16_t bits =
          dequantize(transform, unpack_code(codes, kk), prepared_scale(transform, scales[kk / kBlockK]));
      out[size_t(row) * size_t(k) + size_t(kk)] = double(f16_to_f32(bits));
    }
  }
  return out;
}

// rows x n: out[r][c] = sum_k input[r][k] * w_g[c][k], in float64, groups by `row_offsets`.
template <typename Input>
std::vector<double> GemmF64(const MoeGemmWeights& weights, Transform transform, std::span<const int32_t> row_offsets,
                            int n, int k, const Input& input) {
  const int groups = int(row_offsets.size()) - 1;
  std::vector<double> out(size_t(row_offsets.back()) * size_t(n), 0.0);
  for (int g = 0; g < groups; ++g) {
    if (row_offsets[g] == row_offsets[g + 1]) continue;
    const std::vector<double> w = GroupWeights(weights, transform, g, n, k);
    for (int r = row_offsets[g]; r < row_offsets[g + 1]; ++r) {
      for (int c = 0; c < n; ++c) {
        double sum = 0.0;
        const double* column = w.data() + size_t(c) * size_t(k);
        for (int kk = 0; kk < k; ++kk) sum += input(r, kk) * column[kk];
        out[size_t(r) * size_t(n) + size_t(c)] = sum;
      }
    }
  }
  return out;
}

double SiluF64(double g) {
  if (std::isinf(g) && g < 0) return -0.0;
  return g / (1.0 + std::exp(-g));
}

double SwigluValueF64(double g, double u, double limit) {
  g = g > limit ? limit : g;
  u = u > limit ? limit : (u < -limit ? -limit : u);
  return SiluF64(g) * u;
}

// The combine in float64 from W2 rows given by `y(row, column)`.
template <typename Rows>
double CombineF64(const MoeLayerProblem& p, const MoeSchedule& schedule, int token, int column, const Rows& y) {
  double acc = 0.0;
  for (int s = 0; s < p.shape.top_k; ++s) {
    const size_t entry = size_t(token) * size_t(p.shape.top_k) + size_t(s);
    acc += double(p.routing.weights[entry]) * y(schedule.entry_row[entry], column);
  }
  if (p.shape.shared_expert) acc += y(schedule.shared_row(p.shape, token), column);
  return acc;
}

}  // namespace

uint16_t F64ToF16Rne(double value) {
  if (std::isnan(value)) return kF16CanonicalNaN;
  const uint16_t sign = std::signbit(value) ? 0x8000 : 0;
  const double magnitude = std::fabs(value);
  if (magnitude >= 65520.0) return sign | 0x7C00;  // halfway to 2^16 and beyond round to Inf
  const double ulp = F16Ulp(magnitude);
  const double rounded = std::nearbyint(magnitude / ulp) * ulp;  // exact scaling, ties to even
  return sign | f32_to_f16_rne(float(rounded));  // representable: the conversion is exact
}

void UlpStats::Add(uint16_t result, double exact) {
  const bool result_finite = (result & 0x7C00) != 0x7C00;
  if (!std::isfinite(exact) || std::fabs(exact) >= 65520.0 || !result_finite) {
    ++specials;
    return;
  }
  ++count;
  const uint16_t nearest = F64ToF16Rne(exact);
  if (result == nearest || ((nearest & 0x7FFF) == 0 && (result & 0x7FFF) == 0)) ++correctly_rounded;
  const double ulps = std::fabs(double(f16_to_f32(result)) - exact) / F16Ulp(exact);
  max_ulp = std::max(max_ulp, ulps);
  sum_ulp += ulps;
  size_t bucket = 0;
  while (bucket < kBounds.size() && ulps > kBounds[bucket]) ++bucket;
  ++histogram[bucket];
}

void UlpStats::Merge(const UlpStats& other) {
  count += other.count;
  correctly_rounded += other.correctly_rounded;
  specials += other.specials;
  max_ulp = std::max(max_ulp, other.max_ulp);
  sum_ulp += other.sum_ulp;
  for (size_t i = 0; i < histogram.size(); ++i) histogram[i] += other.histogram[i];
}

std::string UlpStats::Describe() const {
  std::string text = fmt::format("n {}, correctly rounded {:.3f}%, mean {:.4f} ulp, max {:.3f} ulp;", count,
                                 count == 0 ? 0.0 : 100.0 * double(correctly_rounded) / double(count), mean_ulp(),
                                 max_ulp);
  for (size_t i = 0; i < histogram.size(); ++i) {
    text += i < kBounds.size() ? fmt::format(" <={}: {}", kBounds[i], histogram[i])
                               : fmt::format(" >{}: {}", kBounds.back(), histogram[i]);
  }
  return text + fmt::format("; specials {}", specials);
}

double SwigluF64(uint16_t gate, uint16_t up, double limit) {
  return SwigluValueF64(double(f16_to_f32(gate)), double(f16_to_f32(up)), limit);
}

absl::StatusOr<MoeLayerFloat64> Float64MoeLayer(const MoeLayerProblem& p, const MoeLayerOptions& options) {
  MXDIFF_RETURN_IF_ERROR(ValidateMoeProblem(p));
  absl::StatusOr<MoeSchedule> schedule = ScheduleMoeRouting(p.shape, p.routing);
  if (!schedule.ok()) return schedule.status();
  const int hidden = p.shape.hidden, inter = p.shape.intermediate;
  MoeLayerFloat64 layer;
  layer.w13 = GemmF64(p.w13, options.w13.transform, schedule->row_offsets, 2 * inter, hidden, [&](int r, int k) {
    return double(f16_to_f32(p.activations[size_t(schedule->row_token[size_t(r)]) * hidden + size_t(k)]));
  });
  const size_t rows = size_t(schedule->rows());
  layer.activated.resize(rows * size_t(inter));
  for (size_t r = 0; r < rows; ++r) {
    for (int j = 0; j < inter; ++j) {
      layer.activated[r * inter + j] = SwigluValueF64(layer.w13[r * 2 * inter + j], layer.w13[r * 2 * inter + inter + j],
                                                      double(options.swiglu_limit));
    }
  }
  layer.w2 = GemmF64(p.w2, options.w2.transform, schedule->row_offsets, hidden, inter,
                     [&](int r, int k) { return layer.activated[size_t(r) * inter + size_t(k)]; });
  layer.output.resize(size_t(p.routing.tokens) * size_t(hidden));
  for (int t = 0; t < p.routing.tokens; ++t) {
    for (int h = 0; h < hidden; ++h) {
      layer.output[size_t(t) * hidden + h] = CombineF64(
          p, *schedule, t, h, [&](int row, int column) { return layer.w2[size_t(row) * hidden + size_t(column)]; });
    }
  }
  return layer;
}

void MoeLayerDeviation::Merge(const MoeLayerDeviation& other) {
  w13.Merge(other.w13);
  swiglu.Merge(other.swiglu);
  w2.Merge(other.w2);
  combine.Merge(other.combine);
  end_to_end.Merge(other.end_to_end);
}

absl::StatusOr<MoeLayerDeviation> MeasureMoeLayerDeviation(const MoeLayerProblem& p, const MoeLayerOptions& options,
                                                           const MoeLayerStages& stages) {
  absl::StatusOr<MoeLayerFloat64> exact = Float64MoeLayer(p, options);
  if (!exact.ok()) return exact.status();
  const MoeSchedule& schedule = stages.schedule;
  const int hidden = p.shape.hidden, inter = p.shape.intermediate;
  const size_t rows = size_t(schedule.rows());
  MoeLayerDeviation deviation;
  // W13 from the gathered fp16 rows is the end-to-end W13: nothing precedes it but the gather.
  for (size_t i = 0; i < stages.w13.size(); ++i) deviation.w13.Add(stages.w13[i], exact->w13[i]);
  for (size_t r = 0; r < rows; ++r) {
    for (int j = 0; j < inter; ++j) {
      const uint16_t* gate = stages.w13.data() + r * 2 * inter;
      deviation.swiglu.Add(stages.activated[r * inter + j],
                           SwigluF64(gate[j], gate[inter + j], double(options.swiglu_limit)));
    }
  }
  const std::vector<double> w2 = GemmF64(p.w2, options.w2.transform, schedule.row_offsets, hidden, inter,
                                         [&](int r, int k) {
                                           return double(f16_to_f32(stages.activated[size_t(r) * inter + size_t(k)]));
                                         });
  for (size_t i = 0; i < stages.w2.size(); ++i) deviation.w2.Add(stages.w2[i], w2[i]);
  for (int t = 0; t < p.routing.tokens; ++t) {
    for (int h = 0; h < hidden; ++h) {
      const size_t i = size_t(t) * hidden + size_t(h);
      deviation.combine.Add(stages.output[i], CombineF64(p, schedule, t, h, [&](int row, int column) {
                              return double(f16_to_f32(stages.w2[size_t(row) * hidden + size_t(column)]));
                            }));
      deviation.end_to_end.Add(stages.output[i], exact->output[i]);
    }
  }
  return deviation;
}

}  // namespace mxdiff
