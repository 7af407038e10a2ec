#include "reference/step_model_cases.h"

#include "reference/fp16.h"

namespace mxdiff {
namespace {

// fp16 bits
constexpr uint16_t kOne = 0x3C00, kMinusOne = 0xBC00, kHalf = 0x3800, kOneAndHalf = 0x3E00;
constexpr uint16_t kTwoPowMinus12 = 0x0C00, kTwoPowMinus11 = 0x1000, kTwoPow11 = 0x6800, kTwoPow12 = 0x6C00;
constexpr uint16_t kThreeTwoPowMinus13 = 0x0E00;  // 1.5 x 2^-12
constexpr uint16_t kMaxF16 = 0x7BFF, kSmallestSubnormalF16 = 0x0001;
constexpr uint16_t kInfF16 = 0x7C00, kMinusInfF16 = 0xFC00, kNaNF16 = 0x7E00;
// fp32 bits
constexpr uint32_t kOneF32 = 0x3F800000, kNaN = kF32CanonicalNaN, kInf = 0x7F800000, kMinusInf = 0xFF800000;
constexpr uint32_t kMaxF32 = 0x7F7FFFFF, kMinusZero = 0x80000000;

// Expected bits in StepModel order: v100, sm90-emulated, sm90-emulated-ftz, exact.
constexpr std::array<uint32_t, 4> All(uint32_t bits) { return {bits, bits, bits, bits}; }

constexpr StepCase kStepCases[] = {
    {"plain-sum",
     "1 + 1*1 + 1*1 + 1*1 + 1*1 = 5 exactly in every model",
     kOneF32,
     {kOne, kOne, kOne, kOne},
     {kOne, kOne, kOne, kOne},
     All(0x40A00000)},
    {"nan-operand",
     "a NaN fp16 factor makes the step NaN, canonical 0x7FFFFFFF",
     kOneF32,
     {kNaNF16, kOne, 0, 0},
     {kOne, kOne, 0, 0},
     All(kNaN)},
    {"nan-accumulator",
     "c = NaN with payload 0x7FC00001 comes out canonical",
     0x7FC00001,
     {kOne, 0, 0, 0},
     {kOne, 0, 0, 0},
     All(kNaN)},
    {"inf-times-zero",
     "Inf x 0 is NaN (a zero product is skipped only when both factors are finite)",
     0,
     {kInfF16, 0, 0, 0},
     {0, 0, 0, 0},
     All(kNaN)},
    {"inf-minus-inf",
     "+Inf*1 and -Inf*1 in one step: NaN",
     0,
     {kInfF16, kMinusInfF16, 0, 0},
     {kOne, kOne, 0, 0},
     All(kNaN)},
    {"inf-propagates", "+Inf*1 + 1: +Inf", kOneF32, {kInfF16, 0, 0, 0}, {kOne, 0, 0, 0}, All(kInf)},
    {"minus-inf-accumulator",
     "c = -Inf plus finite products: -Inf",
     kMinusInf,
     {kOne, kOne, 0, 0},
     {kOne, kOne, 0, 0},
     All(kMinusInf)},
    {"inf-accumulator-against-product",
     "c = -Inf and a +Inf product: NaN",
     kMinusInf,
     {kInfF16, 0, 0, 0},
     {kOne, 0, 0, 0},
     All(kNaN)},
    {"negative-zeros",
     "c = -0, four -1*0 = -0 products. sm90: fma(-1, 0, +0) = +0 and -0 + +0 = +0; v100: the integer "
     "sum has no -0; exact: IEEE keeps -0 when every term is -0",
     kMinusZero,
     {kMinusOne, kMinusOne, kMinusOne, kMinusOne},
     {0, 0, 0, 0},
     {0, 0, 0, kMinusZero}},
    {"subnormal-accumulator",
     "c = 2^-149 with zero products: kept by v100, sm90 and exact; FTZ flushes c to +0",
     0x00000001,
     {0, 0, 0, 0},
     {0, 0, 0, 0},
     {0x00000001, 0x00000001, 0x00000000, 0x00000001}},
    {"near-overflow",
     "FLT_MAX + 65504^2: the product (< 2^32) is far below half an ulp of FLT_MAX (2^103), so every model "
     "keeps FLT_MAX; one step cannot overflow",
     kMaxF32,
     {kMaxF16, 0, 0, 0},
     {kMaxF16, 0, 0, 0},
     All(kMaxF32)},
    {"tie-to-even",
     "(1 + 2^-23) + 2^-12*2^-12 = 1 + 1.5 ulp: nearest-even gives 1 + 2^-22 (0x3F800002); v100 truncates the "
     "product (grid 2^-23) to 0 and keeps c",
     0x3F800001,
     {kTwoPowMinus12, 0, 0, 0},
     {kTwoPowMinus12, 0, 0, 0},
     {0x3F800001, 0x3F800002, 0x3F800002, 0x3F800002}},
    {"round-up-versus-truncate",
     "1 + 1.5*2^-12 * 2^-12 = 1 + 0.75 ulp: nearest gives 1 + 2^-23; v100 truncates the product to 0: 1.0",
     kOneF32,
     {kThreeTwoPowMinus13, 0, 0, 0},
     {kTwoPowMinus12, 0, 0, 0},
     {kOneF32, 0x3F800001, 0x3F800001, 0x3F800001}},
    {"truncate-toward-zero-below-one",
     "1 - 1.5*2^-24: a tie between 0x3F7FFFFF and 0x3F7FFFFE, nearest-even takes 0x3F7FFFFE; v100 truncates "
     "the negative product toward zero on the 2^-23 grid (to 0) and gives 1.0",
     kOneF32,
     {static_cast<uint16_t>(0x8000 | kThreeTwoPowMinus13), 0, 0, 0},
     {kTwoPowMinus12, 0, 0, 0},
     {kOneF32, 0x3F7FFFFE, 0x3F7FFFFE, 0x3F7FFFFE}},
    {"terms-truncated-before-summing",
     "2^24 + four products of 1: v100 aligns to 2^24 (grid 2^1) and every 1 truncates to 0; the fma chain "
     "sums 4 exactly and 2^24 + 4 is representable",
     0x4B800000,
     {kOne, kOne, kOne, kOne},
     {kOne, kOne, kOne, kOne},
     {0x4B800000, 0x4B800002, 0x4B800002, 0x4B800002}},
    {"fma-chain-rounds-each-step",
     "2^11*2^12 + 0.5 + 0.5: each fma rounds 2^23 + 0.5 to even (2^23); exact gives 2^23 + 1; v100 aligns "
     "to 2^23 (grid 1) and truncates both halves",
     0,
     {kTwoPow11, kHalf, kHalf, 0},
     {kTwoPow12, kOne, kOne, 0},
     {0x4B000000, 0x4B000000, 0x4B000000, 0x4B000001}},
    {"v100-extra-alignment-bit",
     "2^-23 + 1.5*1.5 + 2^-12*2^-11: the product 2.25 has exponent ea+eb = 0 with significand 2.25, so v100 "
     "keeps terms to 2^-23 (not 2^-22): 2.25 + 2^-22 = 0x40100001. The fma chain rounds 2.25 + 2^-23 to even "
     "twice (2.25); exact is 2.25 + 2^-22",
     0x34000000,
     {kOneAndHalf, kTwoPowMinus12, 0, 0},
     {kOneAndHalf, kTwoPowMinus11, 0, 0},
     {0x40100001, 0x40100000, 0x40100000, 0x40100001}},
    {"v100-subnormal-factor-exponent",
     "c = 2^-23 + 2^-43 plus 2^-24*1 with 2^-24 an fp16 subnormal: v100 counts that factor at 2^-14, so the "
     "grid is 2^-37 and c loses 2^-43: 1.5*2^-23 (0x34400000); the others keep 1.5*2^-23 + 2^-43",
     0x34000008,
     {kSmallestSubnormalF16, 0, 0, 0},
     {kOne, 0, 0, 0},
     {0x34400000, 0x34400008, 0x34400008, 0x34400008}},
    {"v100-sum-just-below-a-power-of-two",
     "c = 32759 x 2^-23 plus (2 - 2^-10)^2 = 4190209 x 2^-20: on the grid 2^-23 the sum is 2^25 - 1 units; "
     "v100 truncates to 4 - 2^-22 (0x407FFFFF); nearest: odd 2^25 - 1 units with a 2-unit ulp is a tie, "
     "even goes up to 4.0",
     0x3B7FEE00,
     {0x3FFF, 0, 0, 0},
     {0x3FFF, 0, 0, 0},
     {0x407FFFFF, 0x40800000, 0x40800000, 0x40800000}},
    {"exact-cancellation",
     "1 + (-1)*1: an exact zero is +0 in every model",
     kOneF32,
     {kMinusOne, 0, 0, 0},
     {kOne, 0, 0, 0},
     All(0)},
};

constexpr ReduceCase kReduceCases[] = {
    {"overflow", "FLT_MAX + FLT_MAX rounds to +Inf", kMaxF32, kMaxF32, All(kInf)},
    {"subnormal-result",
     "(2^-126 + 2^-149) - 2^-126 = 2^-149: kept, except FTZ flushes the subnormal result to +0",
     0x00800001,
     0x80800000,
     {0x00000001, 0x00000001, 0x00000000, 0x00000001}},
    {"subnormal-inputs",
     "2^-149 + 2^-149 = 2^-148; FTZ flushes both inputs: +0",
     0x00000001,
     0x00000001,
     {0x00000002, 0x00000002, 0x00000000, 0x00000002}},
    {"nan", "NaN + 1 is the canonical NaN", 0x7FC00000, kOneF32, All(kNaN)},
    {"tie-to-even", "(1 + 2^-23) + 2^-24: a tie, nearest even is 1 + 2^-22", 0x3F800001, 0x33800000,
     All(0x3F800002)},
    {"negative-zeros", "-0 + -0 = -0 (round to nearest)", kMinusZero, kMinusZero, All(kMinusZero)},
    {"inf-minus-inf", "+Inf + -Inf is NaN", kInf, kMinusInf, All(kNaN)},
};

}  // namespace

std::span<const StepCase> HandPickedStepCases() { return kStepCases; }
std::span<const ReduceCase> HandPickedReduceCases() { return kReduceCases; }

}  // namespace mxdiff
