#include "fuzz/formats/tensor_recipe.h"
#include "fuzz/formats/tensor_recipe_element.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <thread>
#include <type_traits>

#include "fmt/format.h"
#include "reference/admission.h"
#include "reference/bulk_loop.h"
#include "reference/hash.h"
#include "reference/reference_gemm.h"

namespace mxdiff::fuzz {
namespace {

static_assert(std::endian::native == std::endian::little, "a code word is stored as little-endian bytes");

constexpr uint64_t kGamma = SplitMix64::kGamma;
// Mixed into the seed for the codes' second hash (the rare units), so the two are unrelated.
constexpr uint64_t kRareSalt = 0xD1B54A32D192ED03ull;

inline uint64_t Finalize(uint64_t z) { return SplitMix64::Finalize(z); }

inline uint64_t KindSeed(TensorKind kind, uint64_t seed) { return Finalize(seed ^ (uint64_t(kind) + 1) * kGamma); }

// The hash of unit `unit` once the seed is mixed: SplitMix64's output number unit + 1.
inline uint64_t Hash(uint64_t mixed_seed, uint64_t unit) { return Finalize(mixed_seed + (unit + 1) * kGamma); }

// Lemire's multiply-shift: a value in 0..n-1 from 32 random bits (no division).
inline uint32_t Below(uint64_t bits, uint32_t n) { return uint32_t((uint64_t(uint32_t(bits)) * n) >> 32); }

// A rare unit: the top rare_log2 bits all zero (probability 2^-rare_log2).
inline bool Rare(uint64_t bits, int rare_log2) { return rare_log2 != 0 && (bits >> (64 - rare_log2)) == 0; }

// Scale bytes outside the checkpoint's range, the rare values of the scales.
constexpr auto kOutOfCheckpoint = [] {
  std::array<uint8_t, std::size(kInterestingScaleBytes)> bytes{};
  size_t count = 0;
  for (uint8_t raw : kInterestingScaleBytes) {
    if (!IsCheckpointScale(raw)) bytes[count++] = raw;
  }
  return std::pair{bytes, count};
}();

constexpr uint8_t kRareCodes[4] = {0x0, 0x8, 0x7, 0xF};  // +-0, +-6

constexpr uint64_t kNibbleBit0 = 0x1111111111111111ull;
constexpr uint64_t kNibbleSign = 0x8888888888888888ull;

// Sixteen codes from 64 random bits, every nibble at once (e2m1: bit 3 sign, magnitude 0..7 =
// 0, 0.5, 1, 1.5, 2, 3, 4, 6). Nibble i of the result is code i of the unit.
inline uint64_t CodeWord(ValueClass value_class, uint64_t h) {
  switch (value_class) {
    case ValueClass::kNormal: {  // nonzero: a zero magnitude becomes 6 (so +-6 is twice as likely)
      uint64_t magnitude = h & ~kNibbleSign;
      const uint64_t zero = ~(magnitude | magnitude >> 1 | magnitude >> 2) & kNibbleBit0;
      magnitude |= zero * 7;
      return magnitude | (h & kNibbleSign);
    }
    case ValueClass::kSubnormal:  // +-0.5 where either of two bits is set (3/4), else +-0
      return ((h | h >> 1) & kNibbleBit0) | (h & kNibbleSign);
    case ValueClass::kSpecials:  // +-0 or +-6
      return (h & kNibbleSign) | (h & kNibbleBit0) * 7;
    case ValueClass::kNarrow:  // +-1 or +-1.5: magnitude 2 or 3
      return (h & (kNibbleSign | kNibbleBit0)) | (kNibbleBit0 << 1);
    case ValueClass::kUniform:
    case ValueClass::kCheckpoint:
      break;
  }
  return h;
}

struct ScaleTables {
  uint8_t admitted[256];  // FoldAdmitted bytes, ascending
  uint32_t admitted_count = 0;
  uint8_t flush_edge[4];  // lowest admitted - 2 .. + 1
};

const ScaleTables& Scales() {
  static const ScaleTables tables = [] {
    ScaleTables t{};
    for (int raw = 0; raw < 256; ++raw) {
      if (FoldAdmitted(uint8_t(raw))) t.admitted[t.admitted_count++] = uint8_t(raw);
    }
    const int lowest = t.admitted_count == 0 ? 0 : t.admitted[0];
    for (int i = 0; i < 4; ++i) t.flush_edge[i] = uint8_t(std::clamp(lowest - 2 + i, 0, 255));
    return t;
  }();
  return tables;
}

inline uint16_t NormalF16(uint64_t h) {
  const uint16_t sign = uint16_t(h & 0x8000);
  const uint16_t exponent = uint16_t(9 + Below(h >> 16, 12));  // 2^-6 .. 2^5
  return uint16_t(sign | (exponent << 10) | (h & 0x3FF));
}

// The narrow class's lower exponent field, from the seed: 13..16 (binades 2^-2 .. 2^2).
int NarrowExponent(uint64_t seed) { return 13 + int(Finalize(seed) & 3); }
// The narrow class's lower byte b of its pair b, b + 1: 114..125, one fewer than the checkpoint's
// count on purpose (not an off-by-one), so that b + 1 <= 126 and both bytes are the checkpoint's;
// the pairs cover 114..126 (tests/fuzz/tensor_recipe_test.cc, NarrowPairsCoverTheCheckpointAndStayInIt).
uint8_t NarrowScale(uint64_t seed) {
  return uint8_t(kCheckpointScaleFirst + Finalize(seed) % (kCheckpointScaleCount - 1));
}

// The per-tensor constants a class needs, looked up once per tensor (not per element).
struct Params {
  int narrow_exponent;
  uint8_t narrow_scale;
  const ScaleTables* scales;
};

Params ParamsOf(uint64_t seed) { return Params{NarrowExponent(seed), NarrowScale(seed), &Scales()}; }

template <ValueClass kClass>
inline uint16_t ActivationOf(const Params& p, uint64_t h) {
  if constexpr (kClass == ValueClass::kNormal) {
    return NormalF16(h);
  } else if constexpr (kClass == ValueClass::kSubnormal) {
    const uint16_t sign = uint16_t(h & 0x8000);
    const uint32_t choice = (h >> 16) & 7;
    if (choice < 6) return uint16_t(sign | std::max<uint16_t>(uint16_t(h & 0x3FF), 1));
    return choice == 6 ? uint16_t(sign | 0x0400 | (h & 0x3FF)) : sign;
  } else if constexpr (kClass == ValueClass::kSpecials) {
    return (h >> 16) & 1 ? kInterestingF16[Below(h >> 20, std::size(kInterestingF16))] : NormalF16(h);
  } else if constexpr (kClass == ValueClass::kNarrow) {
    return uint16_t((h & 0x8000) | ((p.narrow_exponent + ((h >> 16) & 1)) << 10) | (h & 0x3FF));
  } else {
    return uint16_t(h);
  }
}

template <ValueClass kClass>
inline uint8_t ScaleOf(const Params& p, uint64_t h) {
  if constexpr (kClass == ValueClass::kNormal) {
    return p.scales->admitted_count == 0 ? uint8_t(h) : p.scales->admitted[Below(h, p.scales->admitted_count)];
  } else if constexpr (kClass == ValueClass::kSubnormal) {
    return p.scales->flush_edge[h & 3];
  } else if constexpr (kClass == ValueClass::kSpecials) {
    return kInterestingScaleBytes[Below(h, std::size(kInterestingScaleBytes))];
  } else if constexpr (kClass == ValueClass::kNarrow) {
    return uint8_t(p.narrow_scale + (h & 1));
  } else if constexpr (kClass == ValueClass::kCheckpoint) {
    return uint8_t(kCheckpointScaleFirst + Below(h, kCheckpointScaleCount));
  } else {
    return uint8_t(h);
  }
}

inline uint16_t RareActivation(uint64_t h) { return kInterestingF16[Below(h, std::size(kInterestingF16))]; }
inline uint8_t RareScale(uint64_t h) { return kOutOfCheckpoint.first[Below(h, uint32_t(kOutOfCheckpoint.second))]; }

// Calls fn with the class as a compile-time constant, so the per-element loop has no switch.
template <typename Fn>
void WithClass(ValueClass value_class, const Fn& fn) {
  switch (value_class) {
    case ValueClass::kNormal:
      return fn(std::integral_constant<ValueClass, ValueClass::kNormal>{});
    case ValueClass::kSubnormal:
      return fn(std::integral_constant<ValueClass, ValueClass::kSubnormal>{});
    case ValueClass::kSpecials:
      return fn(std::integral_constant<ValueClass, ValueClass::kSpecials>{});
    case ValueClass::kNarrow:
      return fn(std::integral_constant<ValueClass, ValueClass::kNarrow>{});
    case ValueClass::kCheckpoint:
      return fn(std::integral_constant<ValueClass, ValueClass::kCheckpoint>{});
    case ValueClass::kUniform:
      break;
  }
  return fn(std::integral_constant<ValueClass, ValueClass::kUniform>{});
}

uint16_t ActivationElement(ValueClass value_class, const Params& p, uint64_t h) {
  uint16_t value = 0;
  WithClass(value_class, [&](auto c) { value = ActivationOf<decltype(c)::value>(p, h); });
  return value;
}

uint8_t ScaleElement(ValueClass value_class, const Params& p, uint64_t h) {
  uint8_t value = 0;
  WithClass(value_class, [&](auto c) { value = ScaleOf<decltype(c)::value>(p, h); });
  return value;
}

// Runs fn(begin, end) over [0, units) on `threads` threads (the calling one included).
template <typename Fn>
void ForUnits(size_t units, size_t bytes, int threads, const Fn& fn) {
  if (threads == 0) {
    threads = bytes < (size_t(1) << 20) ? 1 : int(std::min(8u, std::max(1u, std::thread::hardware_concurrency())));
  }
  threads = int(std::min<size_t>(size_t(std::max(threads, 1)), std::max<size_t>(units / 4096, 1)));
  if (threads <= 1) {
    fn(size_t{0}, units);
    return;
  }
  std::vector<std::thread> workers;
  const size_t per = (units + size_t(threads) - 1) / size_t(threads);
  for (int t = 1; t < threads; ++t) {
    const size_t begin = std::min(units, per * size_t(t)), end = std::min(units, begin + per);
    workers.emplace_back([&fn, begin, end] { fn(begin, end); });
  }
  fn(size_t{0}, std::min(units, per));
  for (std::thread& worker : workers) worker.join();
}

// The codes of unit `word` with its rare code applied.
inline uint64_t CodeUnit(ValueClass value_class, int rare_log2, uint64_t seed, uint64_t rare_seed, uint64_t word) {
  uint64_t codes = CodeWord(value_class, Hash(seed, word));
  if (rare_log2 != 0) {
    const uint64_t r = Hash(rare_seed, word);
    if (Rare(r, rare_log2)) {
      const int nibble = int(r & 15);
      codes = (codes & ~(uint64_t{0xF} << (4 * nibble))) | (uint64_t(kRareCodes[(r >> 4) & 3]) << (4 * nibble));
    }
  }
  return codes;
}

// Element `index` of a tensor of `kind` stored as `bytes` (fp16 little-endian, packed codes
// low nibble first, or scale bytes) becomes `value`; out-of-range indices are ignored.
inline void SetElement(TensorKind kind, std::span<uint8_t> bytes, uint64_t index, uint16_t value) {
  switch (kind) {
    case TensorKind::kActivations:
      if (index < bytes.size() / 2) std::memcpy(bytes.data() + 2 * index, &value, 2);
      return;
    case TensorKind::kCodes:
      if (index / 2 < bytes.size()) {
        uint8_t& byte = bytes[index / 2];
        byte = index % 2 == 0 ? uint8_t((byte & 0xF0) | (value & 0xF)) : uint8_t((byte & 0x0F) | (value << 4));
      }
      return;
    case TensorKind::kScales:
      if (index < bytes.size()) bytes[index] = uint8_t(value);
      return;
  }
}

// The overrides of elements first_element.. (the tensor's slice that `bytes` holds), in order.
void ApplyOverrides(TensorKind kind, const TensorRecipe& recipe, std::span<uint8_t> bytes,
                    uint64_t first_element = 0) {
  for (const TensorOverride& o : recipe.overrides) {
    if (o.index >= first_element) SetElement(kind, bytes, o.index - first_element, o.value);
  }
}

std::span<uint8_t> AsBytes(std::span<uint16_t> values) {
  return {reinterpret_cast<uint8_t*>(values.data()), values.size_bytes()};
}

}  // namespace

const char* TensorKindName(TensorKind kind) {
  switch (kind) {
    case TensorKind::kActivations:
      return "activations";
    case TensorKind::kCodes:
      return "codes";
    case TensorKind::kScales:
      return "scales";
  }
  return "?";
}

const char* ValueClassName(ValueClass value_class) {
  static constexpr const char* kNames[kValueClassCount] = {"uniform", "normal", "subnormal",
                                                           "specials", "narrow", "checkpoint"};
  return size_t(value_class) < std::size(kNames) ? kNames[size_t(value_class)] : "?";
}

bool ValueClassAllowed(TensorKind kind, ValueClass value_class) {
  if (int(value_class) >= kValueClassCount) return false;
  return value_class != ValueClass::kCheckpoint || kind == TensorKind::kScales;
}

int MaxElementValue(TensorKind kind) {
  return kind == TensorKind::kActivations ? 0xFFFF : kind == TensorKind::kCodes ? 0xF : 0xFF;
}

uint64_t UnitHash(TensorKind kind, uint64_t seed, uint64_t unit) { return Hash(KindSeed(kind, seed), unit); }

void MaterializeActivations(const TensorRecipe& recipe, std::span<uint16_t> out, int threads) {
  const uint64_t seed = KindSeed(TensorKind::kActivations, recipe.seed);
  const Params params = ParamsOf(recipe.seed);
  const int rare = recipe.rare_log2;
  WithClass(recipe.value_class, [&](auto c) {
    ForUnits(out.size(), out.size() * 2, threads, [&](size_t begin, size_t end) {
      // Locals, not captures: the stores could alias anything the loop reads through a reference.
      const uint64_t s = seed;
      const Params local = params;
      uint16_t* values = out.data();
      if (rare == 0) {
        for (size_t i = begin; i < end; ++i) values[i] = ActivationOf<decltype(c)::value>(local, Hash(s, i));
        return;
      }
      const int r = rare;
      for (size_t i = begin; i < end; ++i) {
        const uint64_t h = Hash(s, i);
        values[i] = Rare(h, r) ? RareActivation(h) : ActivationOf<decltype(c)::value>(local, h);
      }
    });
  });
  ApplyOverrides(TensorKind::kActivations, recipe, AsBytes(out));
}

void MaterializeCodes(const TensorRecipe& recipe, std::span<uint8_t> packed, int threads) {
  MaterializeCodeSlice(recipe, 0, packed, threads);
}

void MaterializeCodeSlice(const TensorRecipe& recipe, uint64_t first_code, std::span<uint8_t> packed, int threads) {
  const uint64_t seed = KindSeed(TensorKind::kCodes, recipe.seed);
  const uint64_t rare_seed = KindSeed(TensorKind::kCodes, recipe.seed ^ kRareSalt);
  const int rare = recipe.rare_log2;
  const size_t words = packed.size() / 8;
  const uint64_t first_word = first_code / 16;
  WithClass(recipe.value_class, [&](auto c) {
    ForUnits(words, packed.size(), threads, [&](size_t begin, size_t end) {
      const uint64_t s = seed, rs = rare_seed;
      const int r = rare;
      uint8_t* bytes = packed.data();
      for (size_t w = begin; w < end; ++w) {
        const uint64_t codes = r == 0 ? CodeWord(decltype(c)::value, Hash(s, first_word + w))
                                      : CodeUnit(decltype(c)::value, r, s, rs, first_word + w);
        std::memcpy(bytes + 8 * w, &codes, 8);  // byte b = bits 8b..8b+7: codes 2b (low) and 2b+1
      }
    });
  });
  ApplyOverrides(TensorKind::kCodes, recipe, packed, first_code);
}

namespace {

// Scale bytes begin..end without rare ones: one hash per byte. Written once and compiled twice,
// as is and for AVX-512 (eight hashes per instruction where the CPU has it; the same bytes). `p`
// by value: a copy the stores cannot alias, or clang does not vectorize the loop.
template <ValueClass kClass>
__attribute__((always_inline)) inline void PlainScales(Params p, uint64_t seed, uint8_t* values, size_t begin,
                                                       size_t end) {
  for (size_t i = begin; i < end; ++i) values[i] = ScaleOf<kClass>(p, Hash(seed, i));
}
template <ValueClass kClass>
MXDIFF_BULK_LOOP void PlainScalesScalar(Params p, uint64_t seed, uint8_t* values, size_t begin, size_t end) {
  PlainScales<kClass>(p, seed, values, begin, end);
}
#if defined(__x86_64__)
template <ValueClass kClass>
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl"))) MXDIFF_BULK_LOOP void PlainScalesAvx512(
    Params p, uint64_t seed, uint8_t* values, size_t begin, size_t end) {
  PlainScales<kClass>(p, seed, values, begin, end);
}
#endif

}  // namespace

void MaterializeScales(const TensorRecipe& recipe, std::span<uint8_t> out, int threads) {
  const uint64_t seed = KindSeed(TensorKind::kScales, recipe.seed);
  const Params params = ParamsOf(recipe.seed);
  const int rare = recipe.rare_log2;
  WithClass(recipe.value_class, [&](auto c) {
    ForUnits(out.size(), out.size(), threads, [&](size_t begin, size_t end) {
      const uint64_t s = seed;
      const Params local = params;
      uint8_t* values = out.data();
      if (rare == 0) {
#if defined(__x86_64__)
        if (ReferenceAvx512PathAvailable()) return PlainScalesAvx512<decltype(c)::value>(local, s, values, begin, end);
#endif
        return PlainScalesScalar<decltype(c)::value>(local, s, values, begin, end);
      }
      const int r = rare;
      for (size_t i = begin; i < end; ++i) {
        const uint64_t h = Hash(s, i);
        values[i] = Rare(h, r) ? RareScale(h) : ScaleOf<decltype(c)::value>(local, h);
      }
    });
  });
  ApplyOverrides(TensorKind::kScales, recipe, out);
}

uint16_t GeneratedElement(TensorKind kind, const TensorRecipe& recipe, uint64_t index) {
  const uint64_t seed = KindSeed(kind, recipe.seed);
  const Params params = ParamsOf(recipe.seed);
  switch (kind) {
    case TensorKind::kActivations: {
      const uint64_t h = Hash(seed, index);
      return Rare(h, recipe.rare_log2) ? RareActivation(h) : ActivationElement(recipe.value_class, params, h);
    }
    case TensorKind::kCodes: {
      const uint64_t codes = CodeUnit(recipe.value_class, recipe.rare_log2, seed,
                                      KindSeed(kind, recipe.seed ^ kRareSalt), index / 16);
      return uint16_t((codes >> (4 * (index % 16))) & 0xF);
    }
    case TensorKind::kScales: {
      const uint64_t h = Hash(seed, index);
      return Rare(h, recipe.rare_log2) ? RareScale(h) : ScaleElement(recipe.value_class, params, h);
    }
  }
  return 0;
}

RecipeTables MakeRecipeTables(TensorKind kind, const TensorRecipe& recipe) {
  RecipeTables t;
  t.seed = KindSeed(kind, recipe.seed);
  t.rare_seed = KindSeed(kind, recipe.seed ^ kRareSalt);
  t.rare_log2 = recipe.rare_log2;
  t.value_class = uint8_t(recipe.value_class);
  const Params params = ParamsOf(recipe.seed);
  t.narrow_exponent = params.narrow_exponent;
  t.narrow_scale = params.narrow_scale;
  t.admitted_count = params.scales->admitted_count;
  std::copy(std::begin(params.scales->admitted), std::end(params.scales->admitted), t.admitted);
  std::copy(std::begin(params.scales->flush_edge), std::end(params.scales->flush_edge), t.flush_edge);
  std::copy(std::begin(kInterestingF16), std::end(kInterestingF16), t.interesting_f16);
  std::copy(std::begin(kInterestingScaleBytes), std::end(kInterestingScaleBytes), t.interesting_scales);
  t.out_of_checkpoint_count = uint32_t(kOutOfCheckpoint.second);
  std::copy(kOutOfCheckpoint.first.begin(), kOutOfCheckpoint.first.end(), t.out_of_checkpoint);
  return t;
}

bool SameGenerator(const TensorRecipe& a, const TensorRecipe& b) {
  return a.value_class == b.value_class && a.rare_log2 == b.rare_log2 && a.seed == b.seed;
}

void RematerializeOverrides(TensorKind kind, const TensorRecipe& recipe, std::span<const uint32_t> stale,
                            std::span<uint8_t> tensor) {
  for (uint32_t index : stale) SetElement(kind, tensor, index, GeneratedElement(kind, recipe, index));
  ApplyOverrides(kind, recipe, tensor);
}

std::string DescribeRecipe(const TensorRecipe& recipe) {
  std::string text = fmt::format("{} seed 0x{:x}", ValueClassName(recipe.value_class), recipe.seed);
  if (recipe.rare_log2 != 0) text += fmt::format(" rare 2^-{}", recipe.rare_log2);
  if (!recipe.overrides.empty()) text += fmt::format(", {} overrides", recipe.overrides.size());
  return text;
}

}  // namespace mxdiff::fuzz
