// How far the MoE layer's contract (fp32 accumulation, fp16 between stages, the fp32 SwiGLU of
// reference/swiglu.h) lies from the same layer computed in float64. This is a measurement, kept
// apart from bit mismatches: the contract is what the kernels must reproduce exactly; this says
// what that contract costs in accuracy. The float64 layer uses the same fp16 activations and the
// same dequantized fp16 weights (the kernel contract's weights for the transform), so only the
// arithmetic differs.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "reference/moe_layer.h"

namespace mxdiff {

// fp16 round to nearest even of a double (overflow to Inf, NaN canonical), with no double rounding.
uint16_t F64ToF16Rne(double value);

// Distance of fp16 results from exact values, in units of the fp16 ulp at the exact value.
struct UlpStats {
  static constexpr std::array<double, 5> kBounds = {0.5, 1.0, 2.0, 8.0, 64.0};
  size_t count = 0;              // finite exact values within the fp16 range
  size_t correctly_rounded = 0;  // the fp16 result equals F64ToF16Rne(exact)
  size_t specials = 0;           // exact value not finite or beyond fp16, or a non-finite result: not counted
  double max_ulp = 0;
  double sum_ulp = 0;
  std::array<size_t, kBounds.size() + 1> histogram{};  // <= 0.5, <= 1, <= 2, <= 8, <= 64, beyond

  void Add(uint16_t result, double exact);
  void Merge(const UlpStats& other);
  double mean_ulp() const { return count == 0 ? 0.0 : sum_ulp / double(count); }
  // "n 12345, correctly rounded 99.1%, mean 0.27 ulp, max 1.5 ulp; <=0.5: ..., specials 3"
  std::string Describe() const;
};

// The clamped SwiGLU in float64 (std::exp) of the same fp16 inputs: min, clamp, g / (1 + e^-g) * u.
double SwigluF64(uint16_t gate, uint16_t up, double limit);

struct MoeLayerFloat64 {
  std::vector<double> w13, activated, w2, output;  // end to end in float64, no fp16 between stages
};
absl::StatusOr<MoeLayerFloat64> Float64MoeLayer(const MoeLayerProblem& problem, const MoeLayerOptions& options);

struct MoeLayerDeviation {
  // Each stage in float64 from the contract's own input to that stage (its error alone).
  UlpStats w13, swiglu, w2, combine;
  // The contract's output against the float64 layer end to end.
  UlpStats end_to_end;
  void Merge(const MoeLayerDeviation& other);
};
absl::StatusOr<MoeLayerDeviation> MeasureMoeLayerDeviation(const MoeLayerProblem& problem,
                                                           const MoeLayerOptions& options,
                                                           const MoeLayerStages& stages);

}  // namespace mxdiff
