#include "reference/self_check.h"

#include <cmath>
#include <functional>
#include <optional>

#include "fmt/core.h"
#include "reference/admission.h"
#include "reference/fp16.h"
#include "reference/mx_spec.h"
#include "reference/step_model.h"
#include "reference/step_model_cases.h"
#include "reference/transform.h"

namespace mxdiff {
namespace {

// A property over all 16 codes x 256 bytes: returns the first counterexample's description.
using Property = std::function<std::optional<std::string>(uint8_t code, uint8_t raw)>;

SelfCheckResult CheckAll(std::string name, std::string claim, const Property& property) {
  for (int raw = 0; raw < 256; ++raw) {
    for (int code = 0; code < 16; ++code) {
      if (std::optional<std::string> failure = property(uint8_t(code), uint8_t(raw))) {
        return {std::move(name), false, fmt::format("code {:#x} raw {}: {}", code, raw, *failure)};
      }
    }
  }
  return {std::move(name), true, std::move(claim)};
}

uint16_t Ordinary(uint8_t code, uint8_t raw) {
  return dequantize(Transform::kOrdinary, code, prepared_scale(Transform::kOrdinary, raw));
}
uint16_t Folded(uint8_t code, uint8_t raw) {
  return dequantize(Transform::kFolded, code, prepared_scale(Transform::kFolded, raw));
}

// place_e2m1 and the ordinary transform against the MX definition.
std::vector<SelfCheckResult> OrdinaryTransformChecks() {
  std::vector<SelfCheckResult> results;
  results.push_back(CheckAll("transform/placement", "place_e2m1(code) is e2m1(code) x 2^-14 for all 16 codes",
                             [](uint8_t code, uint8_t) -> std::optional<std::string> {
                               const double placed = f16_to_f32(place_e2m1(code));
                               const double want = std::ldexp(E2m1Halves(code), -15);
                               if (placed == want && std::signbit(placed) == ((code & 8) != 0))
                                 return std::nullopt;
                               return fmt::format("placed {} want {}", placed, want);
                             }));
  results.push_back(
      CheckAll("transform/ordinary-equals-spec",
               "ordinary equals e2m1 x 2^(raw-127) exactly for raw 113..140 (a = 1..28), every code",
               [](uint8_t code, uint8_t raw) -> std::optional<std::string> {
                 if (raw < 113 || raw > 140) return std::nullopt;
                 const double kernel = f16_to_f32(Ordinary(code, raw));
                 const double spec = MxSpecElement(code, raw).ToDouble();
                 if (kernel == spec) return std::nullopt;
                 return fmt::format("kernel {} spec {}", kernel, spec);
               }));
  results.push_back(CheckAll("transform/ordinary-flush", "ordinary gives a zero for raw <= 112 (a = 0)",
                             [](uint8_t code, uint8_t raw) -> std::optional<std::string> {
                               if (raw > 112 || (Ordinary(code, raw) & 0x7FFF) == 0) return std::nullopt;
                               return fmt::format("got {:04x}", Ordinary(code, raw));
                             }));
  results.push_back(CheckAll(
      "transform/ordinary-saturates", "ordinary for raw 142..255 (0xFF included) equals raw 142 (a = 30)",
      [](uint8_t code, uint8_t raw) -> std::optional<std::string> {
        if (raw < 142 || Ordinary(code, raw) == Ordinary(code, 142)) return std::nullopt;
        return fmt::format("got {:04x}, raw 142 gives {:04x}", Ordinary(code, raw), Ordinary(code, 142));
      }));
  return results;
}

// The folded transform: where it equals the ordinary one and how it differs elsewhere.
std::vector<SelfCheckResult> FoldedTransformChecks() {
  std::vector<SelfCheckResult> results;
  results.push_back(CheckAll("transform/folded-equals-ordinary",
                             "folded and ordinary are bitwise equal for raw 113..128 (a = 1..16)",
                             [](uint8_t code, uint8_t raw) -> std::optional<std::string> {
                               if (raw < 113 || raw > 128 || Folded(code, raw) == Ordinary(code, raw))
                                 return std::nullopt;
                               return fmt::format("folded {:04x} ordinary {:04x}", Folded(code, raw),
                                                  Ordinary(code, raw));
                             }));
  results.push_back(CheckAll("transform/folded-halves-at-a0",
                             "folded for raw <= 112 (a = 0) is the placed value x 2^-1 (x/2), not 0",
                             [](uint8_t code, uint8_t raw) -> std::optional<std::string> {
                               if (raw > 112) return std::nullopt;
                               const double want = std::ldexp(double(f16_to_f32(place_e2m1(code))), -1);
                               const double got = f16_to_f32(Folded(code, raw));
                               if (got == want && ((code & 7) == 0 || got != 0.0)) return std::nullopt;
                               return fmt::format("got {} want {}", got, want);
                             }));
  results.push_back(CheckAll(
      "transform/folded-inf-at-a17",
      "folded for raw 129 (a = 17): exponent field 31, +-Inf, and 0 x Inf = NaN 0x7FFF",
      [](uint8_t code, uint8_t raw) -> std::optional<std::string> {
        if (raw != 129) return std::nullopt;
        const uint16_t got = Folded(code, raw);
        const uint16_t want = (code & 7) == 0 ? kF16CanonicalNaN : uint16_t((code & 8) ? 0xFC00 : 0x7C00);
        if (got == want) return std::nullopt;
        return fmt::format("got {:04x} want {:04x}", got, want);
      }));
  results.push_back(CheckAll("transform/folded-sign-spill",
                             "folded for raw >= 130 (a >= 18): the scale's sign bit is set, so every "
                             "nonzero code comes out with the opposite sign",
                             [](uint8_t code, uint8_t raw) -> std::optional<std::string> {
                               if (raw < 130 || (code & 7) == 0) return std::nullopt;
                               const uint16_t got = Folded(code, raw);
                               if ((prepared_scale(Transform::kFolded, raw) & 0x8000) != 0 &&
                                   ((got >> 15) != 0) != ((code & 8) != 0)) {
                                 return std::nullopt;
                               }
                               return fmt::format("got {:04x}", got);
                             }));
  return results;
}

SelfCheckResult CanonicalNanCheck() {
  return CheckAll("transform/canonical-nan", "every NaN either transform produces is 0x7FFF",
                  [](uint8_t code, uint8_t raw) -> std::optional<std::string> {
                    for (uint16_t bits : {Ordinary(code, raw), Folded(code, raw)}) {
                      if (f16_is_nan(bits) && bits != kF16CanonicalNaN) {
                        return fmt::format("NaN {:04x}", bits);
                      }
                    }
                    return std::nullopt;
                  });
}

// The checkpoint's class 114..126: how many of its (byte, code) patterns the transforms agree on.
SelfCheckResult Seed208Check() {
  int equal = 0;
  for (int raw = 114; raw <= 126; ++raw) {
    for (int code = 0; code < 16; ++code)
      equal += Folded(uint8_t(code), uint8_t(raw)) == Ordinary(uint8_t(code), uint8_t(raw));
  }
  return {"transform/seed-208", equal == 208,
          fmt::format("the checkpoint's raw 114..126: {}/208 patterns equal", equal)};
}

SelfCheckResult DerivedAdmissionSetCheck() {
  std::string mismatches;
  for (int raw = 0; raw < 256; ++raw) {
    if (FoldAdmitted(uint8_t(raw)) != (raw >= 113 && raw <= 128)) mismatches += fmt::format(" {}", raw);
  }
  return {"admission/derived-set", mismatches.empty(),
          mismatches.empty() ? "the bytes where folded == ordinary for all 16 codes are exactly 113..128"
                             : "differs from 113..128 at" + mismatches};
}

SelfCheckResult LayerVerdictCheck() {
  const uint8_t layer[] = {120, 113, 128, 112, 126, 129, 255, 114};
  const LayerAdmission verdict = AdmitLayer(layer);
  const bool ok = !verdict.admitted && verdict.refused_count == 3 && verdict.refused.size() == 3 &&
                  verdict.refused[0].index == 3 && verdict.refused[0].raw == 112 && verdict.refused[1].index == 5 &&
                  verdict.refused[2].index == 6 && verdict.refused[2].raw == 255;
  return {"admission/layer-verdict", ok, "a layer with raw 112, 129, 255 at 3, 5, 6 is refused: " + verdict.Describe()};
}

std::vector<SelfCheckResult> TransformChecks() {
  std::vector<SelfCheckResult> results = OrdinaryTransformChecks();
  for (SelfCheckResult& result : FoldedTransformChecks()) results.push_back(std::move(result));
  results.push_back(CanonicalNanCheck());
  results.push_back(Seed208Check());
  results.push_back(DerivedAdmissionSetCheck());
  results.push_back(LayerVerdictCheck());
  return results;
}

std::vector<SelfCheckResult> Fp16Checks() {
  int failures = 0;
  uint32_t first = 0;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t back = f32_to_f16_rne(f16_to_f32(uint16_t(h)));
    const uint16_t want = f16_is_nan(uint16_t(h)) ? kF16CanonicalNaN : uint16_t(h);
    if (back != want && failures++ == 0) first = h;
  }
  return {{"fp16/round-trip", failures == 0,
           failures == 0 ? "f32_to_f16_rne(f16_to_f32(h)) == h for all 65536 patterns (NaN -> 0x7FFF)"
                         : fmt::format("{} patterns fail, first {:04x}", failures, first)}};
}

std::vector<SelfCheckResult> ModelChecks() {
  std::vector<SelfCheckResult> results;
  for (StepModel model : kAllStepModels) {
    for (const StepCase& c : HandPickedStepCases()) {
      const uint32_t got = Step(model, c.c, c.a, c.b);
      const uint32_t want = c.expected[int(model)];
      results.push_back({fmt::format("step/{}/{}", StepModelName(model), c.name), got == want,
                         got == want ? fmt::format("{:08x}", got)
                                     : fmt::format("got {:08x} want {:08x}: {}", got, want, c.why)});
    }
    for (const ReduceCase& c : HandPickedReduceCases()) {
      const uint32_t got = ReduceAdd(model, c.partial_sum, c.partial);
      const uint32_t want = c.expected[int(model)];
      results.push_back({fmt::format("reduce/{}/{}", StepModelName(model), c.name), got == want,
                         got == want ? fmt::format("{:08x}", got)
                                     : fmt::format("got {:08x} want {:08x}: {}", got, want, c.why)});
    }
  }
  return results;
}

}  // namespace

std::vector<SelfCheckResult> RunSelfChecks() {
  std::vector<SelfCheckResult> results = TransformChecks();
  for (auto&& group : {Fp16Checks(), ModelChecks()})
    results.insert(results.end(), group.begin(), group.end());
  return results;
}

}  // namespace mxdiff
