#include "fuzz/checks/transform_target.h"

#include <array>
#include <bitset>
#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "fuzz/driver/coverage_counters.h"
#include "fuzz/driver/fuzz_target.h"
#include "reference/admission.h"
#include "reference/fp16.h"
#include "reference/transform.h"

namespace mxdiff::fuzz {
namespace {

// E2M1 magnitudes of codes 0..7 (docs/numerics.md: formats), written from the spec table rather than
// derived from place_e2m1 or taken from reference/mx_spec.h's kE2m1MagnitudeHalves, so that the
// check is independent of the code under test: a wrong value there must not be copied here.
constexpr double kE2m1Magnitude[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};

double E2m1Value(uint8_t code) { return (code & 0x8) ? -kE2m1Magnitude[code & 7] : kE2m1Magnitude[code & 7]; }

// The fp16 value an exact real rounds to when it is representable (2 significant bits,
// exponent >= -24) or overflows: the value itself or an infinity of its sign.
double F16OfExact(double value) {
  return std::fabs(value) > 65504.0 ? std::copysign(INFINITY, value) : value;
}

bool SameF16Value(uint16_t bits, double expected) {
  const double got = f16_to_f32(bits);
  if (expected == 0.0) return got == 0.0 && std::signbit(got) == std::signbit(expected);
  return got == expected;
}

Finding TransformFinding(std::string signature, uint8_t raw, uint8_t code, uint16_t ordinary, uint16_t folded,
                         std::string what) {
  return Finding{std::move(signature),
                 fmt::format("{} (scale byte raw {} = 0x{:02x}, a = {}, code 0x{:x} = {}): ordinary 0x{:04x} = {}, "
                             "folded 0x{:04x} = {}",
                             what, raw, raw, adjusted_exponent(raw), code, E2m1Value(code), ordinary,
                             f16_to_f32(ordinary), folded, f16_to_f32(folded))};
}

CheckResult CheckScaleByte(uint8_t raw) {
  const uint16_t ordinary_scale = prepared_scale(Transform::kOrdinary, raw);
  const uint16_t folded_scale = prepared_scale(Transform::kFolded, raw);
  const int a = adjusted_exponent(raw);
  const int expected_a = raw <= 112 ? 0 : (raw >= 142 ? 30 : raw - 112);
  if (a != expected_a) {
    return Finding{fmt::format("transform/adjusted-exponent/raw={}", raw),
                   fmt::format("adjusted_exponent({}) = {}, docs/numerics.md: the ordinary transform says clamp(raw - 112, 0, 30) = {}", raw, a,
                               expected_a)};
  }
  bool agree = true;
  for (uint8_t code = 0; code < 16; ++code) {
    const uint16_t ordinary = dequantize(Transform::kOrdinary, code, ordinary_scale);
    const uint16_t folded = dequantize(Transform::kFolded, code, folded_scale);
    agree &= ordinary == folded;
    const double e2m1 = E2m1Value(code);
    // Ordinary against the MX spec: exact inside raw 113..142, flushed below (a = 0),
    // saturated at 2^15 above (the NaN byte included): the kernel's documented contract.
    const int ordinary_exponent = raw <= 112 ? 0 : (raw >= 142 ? 15 : raw - 127);
    const double expected_ordinary = raw <= 112 ? std::copysign(0.0, e2m1) : F16OfExact(std::ldexp(e2m1, ordinary_exponent));
    if (!SameF16Value(ordinary, expected_ordinary)) {
      return TransformFinding(fmt::format("transform/ordinary-vs-mx-spec/raw={}", raw), raw, code, ordinary, folded,
                              fmt::format("ordinary value differs from the MX-spec value {} under the contract",
                                          expected_ordinary));
    }
    // Folded: x 2^(a-15) for a <= 16 (a = 0 halves where ordinary flushes), Inf scale at a = 17.
    if (a <= 16) {
      const double expected_folded = F16OfExact(std::ldexp(e2m1, a - 15));
      if (!SameF16Value(folded, expected_folded)) {
        return TransformFinding(fmt::format("transform/folded-value/a={}", a), raw, code, ordinary, folded,
                                fmt::format("folded value differs from e2m1 x 2^(a-15) = {}", expected_folded));
      }
    } else if (a == 17) {
      const bool expect_nan = (code & 7) == 0;  // 0 x Inf
      const bool ok = expect_nan ? folded == kF16CanonicalNaN : f16_is_inf(folded);
      if (!ok) {
        return TransformFinding("transform/folded-value/a=17", raw, code, ordinary, folded,
                                "folded at a = 17 must be Inf (NaN 0x7fff for a zero code)");
      }
    }
  }
  if (FoldAdmitted(raw) != agree) {
    return Finding{fmt::format("transform/admission-{}/raw={}", agree ? "refuses-equal" : "admits-different", raw),
                   fmt::format("FoldAdmitted({}) = {} but the transforms {} on all 16 codes", raw, FoldAdmitted(raw),
                               agree ? "agree" : "do not agree")};
  }
  return std::nullopt;
}

CheckResult CheckNibbleOrder(const FuzzCase& c) {
  // docs/numerics.md: formats: the low nibble holds the even k element.
  const size_t check = std::min<size_t>(c.packed_codes.size(), 16);
  for (size_t i = 0; i < check; ++i) {
    const uint8_t byte = c.packed_codes[i];
    const uint8_t even = unpack_code(c.packed_codes.data(), int(2 * i));
    const uint8_t odd = unpack_code(c.packed_codes.data(), int(2 * i + 1));
    if (even != (byte & 0xF) || odd != (byte >> 4)) {
      return Finding{"transform/nibble-order",
                     fmt::format("packed byte 0x{:02x} at {} unpacks to k={}: 0x{:x}, k={}: 0x{:x}; the low nibble "
                                 "must be the even k",
                                 byte, i, 2 * i, even, 2 * i + 1, odd)};
    }
  }
  return std::nullopt;
}

// The kernels' vectorized dequantization (dequantize_word: eight codes of a little-endian
// word as four fp16 pairs, even k in the low half) against the scalar dequantize of each code.
CheckResult CheckDequantizeWord(const FuzzCase& c) {
  // One word per case (which one depends on the case): the check costs as much as the rest.
  const size_t words = c.packed_codes.size() / 4;
  const size_t first = c.activations.empty() ? 0 : c.activations[0];
  for (size_t w = first % std::max<size_t>(words, 1); w < words; w += words) {
    const uint8_t* bytes = c.packed_codes.data() + 4 * w;
    const uint32_t word = uint32_t(bytes[0]) | (uint32_t(bytes[1]) << 8) | (uint32_t(bytes[2]) << 16) |
                          (uint32_t(bytes[3]) << 24);
    const uint8_t raw = c.scale_bytes[w % c.scale_bytes.size()];
    for (Transform transform : {Transform::kOrdinary, Transform::kFolded}) {
      const uint16_t scale = prepared_scale(transform, raw);
      uint32_t pairs[4];
      dequantize_word(transform, word, scale, pairs);
      for (int k = 0; k < 8; ++k) {
        const uint16_t expected = dequantize(transform, unpack_code(bytes, k), scale);
        const uint16_t got = uint16_t(pairs[k / 2] >> (16 * (k % 2)));
        if (got != expected) {
          return Finding{fmt::format("transform/dequantize-word/{}", TransformName(transform)),
                         fmt::format("word 0x{:08x}, scale byte {}: dequantize_word gives k={} 0x{:04x}, dequantize "
                                     "of code 0x{:x} gives 0x{:04x}",
                                     word, raw, k, got, unpack_code(bytes, k), expected)};
        }
      }
    }
  }
  return std::nullopt;
}

// Whether the two transforms agree on all 16 codes of scale byte `raw` (once per byte per process).
bool TransformsAgree(uint8_t raw) {
  static const std::array<bool, 256> agree = [] {
    std::array<bool, 256> table{};
    for (int byte = 0; byte < 256; ++byte) {
      const uint16_t ordinary_scale = prepared_scale(Transform::kOrdinary, uint8_t(byte));
      const uint16_t folded_scale = prepared_scale(Transform::kFolded, uint8_t(byte));
      table[byte] = true;
      for (uint8_t code = 0; code < 16; ++code) {
        table[byte] = table[byte] && dequantize(Transform::kOrdinary, code, ordinary_scale) ==
                                         dequantize(Transform::kFolded, code, folded_scale);
      }
    }
    return table;
  }();
  return agree[raw];
}

size_t RefusedBytes(const FuzzCase& c) {
  size_t refused = 0;
  for (uint8_t raw : c.scale_bytes) refused += TransformsAgree(raw) ? 0 : 1;
  return refused;
}

// Every scale byte against the MX spec and the contract, and its admission.
CheckResult CheckScaleBytes(const FuzzCase& c) {
  // The transforms are pure functions of the scale byte, so each byte that passed is not checked again.
  static std::array<bool, 256> passed{};
  for (uint8_t raw : c.scale_bytes) {
    CountScaleClass(raw);
    if (passed[raw]) continue;
    if (CheckResult finding = CheckScaleByte(raw)) return finding;
    passed[raw] = true;
  }
  return std::nullopt;
}

// AdmitLayer's verdict against the per-byte count of bytes whose transforms differ.
CheckResult CheckLayerAdmission(const FuzzCase& c) {
  const size_t refused = RefusedBytes(c);
  const LayerAdmission admission = AdmitLayer(c.scale_bytes);
  if (admission.admitted != (refused == 0) || admission.refused_count != refused) {
    return Finding{"admission/layer-verdict",
                   fmt::format("AdmitLayer says admitted={} refused_count={}, the per-byte check finds {} "
                               "refused bytes",
                               admission.admitted, admission.refused_count, refused)};
  }
  return std::nullopt;
}

// The route, over a registry holding both variants of the case's tactic: folded must never
// run where any code of any scale byte of the layer would change bits.
CheckResult CheckRoute(const FuzzCase& c) {
  const size_t refused = RefusedBytes(c);
  const bool admitted = AdmitLayer(c.scale_bytes).admitted;
  KernelRegistry registry;
  registry.Add(c.tactic, Transform::kOrdinary);
  registry.Add(c.tactic, Transform::kFolded);
  absl::StatusOr<Route> route =
      DecideRoute(registry, c.tactic, c.request, c.policy, admitted, admitted ? "" : "refused layer");
  if (!route.ok()) {
    CountRouteError(c.request, c.policy, route.status().code());
    return std::nullopt;
  }
  CountRoute(*route);
  if (route->variant == Transform::kFolded && refused != 0) {
    return Finding{"route/folded-on-refused",
                   fmt::format("route took folded ({}) on a layer with {} scale bytes whose transforms differ",
                               RouteReasonName(route->reason), refused)};
  }
  return std::nullopt;
}

std::set<std::string, std::less<>>& PlantedChecks() {
  static std::set<std::string, std::less<>> planted;
  return planted;
}

CheckResult Planted(std::string_view name) {
  return Finding{fmt::format("transform/planted/{}", name), fmt::format("check {} planted by a test", name)};
}

constexpr NamedCheck<FuzzCase> kTransformChecks[] = {
    {"scale-bytes", CheckScaleBytes}, {"nibble-order", CheckNibbleOrder}, {"dequantize-word", CheckDequantizeWord},
    {"layer-admission", CheckLayerAdmission}, {"route", CheckRoute},
};

}  // namespace

std::vector<std::string_view> TransformCheckNames() { return CheckNamesOf(kTransformChecks); }

std::vector<Finding> TransformFindings(const FuzzCase& c) {
  std::vector<Finding> findings;
  for (const NamedCheck<FuzzCase>& check : kTransformChecks) {
    CheckResult finding = check.run(c);
    if (!finding && PlantedChecks().contains(check.name)) finding = Planted(check.name);
    if (finding) findings.push_back(*std::move(finding));
  }
  return findings;
}

void PlantTransformChecksForTest(std::vector<std::string> names) {
  PlantedChecks() = {names.begin(), names.end()};
}

}  // namespace mxdiff::fuzz
