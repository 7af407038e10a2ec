#include "fuzz/checks/independent_checks.h"

#include <cpuid.h>
#include <immintrin.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "fmt/format.h"
#include "fuzz/checks/recorded_vectors.h"
#include "reference/fp16.h"
#include "reference/hash.h"
#include "reference/step_model.h"
#include "reference/vector_file.h"

namespace mxdiff::fuzz {
namespace {

// The CPU's own conversions (F16C), round to nearest even by the instruction's immediate.
__attribute__((target("f16c"))) float CpuF16ToF32(uint16_t h) { return _cvtsh_ss(h); }
__attribute__((target("f16c"))) uint16_t CpuF32ToF16(float f) {
  return uint16_t(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}

bool CpuHasF16c() {
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;  // CPUID leaf 1: F16C is ECX bit 29
    const bool supported = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0;
    if (!supported) std::fprintf(stderr, "mxdiff: this CPU has no F16C: the fp16 helpers are not cross-checked\n");
    return supported;
  }();
  return has;
}

uint32_t Bits(float f) { return f32_to_bits(f); }

// Flush an fp32 subnormal to a zero of its sign, written independently of the reference.
float FlushSubnormal(float f) { return std::fpclassify(f) == FP_SUBNORMAL ? std::copysign(0.0f, f) : f; }

uint32_t Canonical(float f) { return std::isnan(f) ? kF32CanonicalNaN : Bits(f); }

// nvcc's emulation of one m8n8k4 step through the C library's fmaf.
uint32_t FmafChain(uint32_t c, const uint16_t* a, const uint16_t* b, bool flush) {
  auto maybe_flush = [&](float f) { return flush ? FlushSubnormal(f) : f; };
  float t = 0.0f;
  for (int i = 0; i < 4; ++i) t = maybe_flush(std::fmaf(CpuF16ToF32(a[i]), CpuF16ToF32(b[i]), t));
  return Canonical(maybe_flush(maybe_flush(bits_to_f32(c)) + t));
}

struct Sample {
  std::vector<uint16_t> f16;
  std::vector<float> f32;
  std::vector<uint32_t> accumulators;
};

// The case's fp16 values, and fp32 values derived from them in the rare classes.
Sample RareClassSample(const FuzzCase& c) {
  constexpr size_t kMaxValues = 256;
  Sample sample;
  const size_t count = std::min(c.activations.size(), kMaxValues);
  sample.f16.assign(c.activations.begin(), c.activations.begin() + long(count));
  // Typed here, not reference/fp16.h's kF16SpecialValues: this check judges the reference's fp16
  // helpers, so the values it tries must not be the reference's own choice (and its pairs of
  // neighbours stay as they are when that table grows).
  for (uint16_t h : {0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x7BFF, 0x7C00, 0xFC00, 0x7E00, 0x7C01}) {
    sample.f16.push_back(h);
  }
  for (size_t i = 0; i + 1 < sample.f16.size(); ++i) {
    const uint16_t h0 = sample.f16[i], h1 = sample.f16[i + 1];
    const float sign = (h0 & 0x8000) ? -1.0f : 1.0f;
    const uint32_t widened = Bits(CpuF16ToF32(uint16_t(h0 & 0x7BFF)));  // finite, below the largest
    const float tie = bits_to_f32(widened + 0x1000);  // halfway to the next fp16 magnitude
    sample.f32.insert(sample.f32.end(), {sign * tie, sign * std::nextafter(tie, 0.0f),
                                         sign * std::nextafter(tie, INFINITY)});
    const float subnormal_tie = std::ldexp(float(2 * (h0 & 0x3FF) + 1), -25);  // between fp16 subnormals
    sample.f32.insert(sample.f32.end(), {sign * subnormal_tie, -sign * subnormal_tie});
    const uint32_t bits = (uint32_t(h0) << 16) | h1;
    sample.f32.push_back(bits_to_f32(bits));
    sample.f32.push_back(bits_to_f32(bits & 0x807FFFFF));  // an fp32 subnormal (or zero)
    sample.accumulators.push_back(bits & 0x807FFFFF);
    sample.accumulators.push_back(bits);
  }
  for (float f : {65504.0f, 65519.996f, 65520.0f, -65520.0f, 0.0f, -0.0f}) sample.f32.push_back(f);
  sample.accumulators.insert(sample.accumulators.end(), {0x00000000, 0x80000000, 0x00000001, 0x807FFFFF});
  return sample;
}

CheckResult CheckFp16Helpers(const Sample& sample) {
  for (uint16_t h : sample.f16) {
    const float ours = f16_to_f32(h), cpu = CpuF16ToF32(h);
    if (std::isnan(cpu) ? !std::isnan(ours) : Bits(ours) != Bits(cpu)) {
      return Finding{"independent/f16-to-f32", fmt::format("f16_to_f32(0x{:04x}) = 0x{:08x}, the CPU (F16C) says 0x{:08x}",
                                                           h, Bits(ours), Bits(cpu))};
    }
  }
  for (float f : sample.f32) {
    const uint16_t ours = f32_to_f16_rne(f), cpu = CpuF32ToF16(f);
    if (std::isnan(f) ? ours != kF16CanonicalNaN : ours != cpu) {
      return Finding{"independent/f32-to-f16",
                     fmt::format("f32_to_f16_rne(0x{:08x} = {}) = 0x{:04x}, the CPU (F16C) says 0x{:04x}", Bits(f), f,
                                 ours, cpu)};
    }
  }
  // Multipliers whose products with most fp16 values land exactly halfway between two fp16s.
  constexpr uint16_t kTieMultipliers[] = {0x3E00, 0x3D00, 0x3C01, 0x3A00};
  for (size_t i = 0; i + 1 < sample.f16.size(); ++i) {
    for (uint16_t b : {sample.f16[i + 1], kTieMultipliers[i % 4]}) {
      const uint16_t a = sample.f16[i];
      const uint16_t ours = f16_mul(a, b);
      const uint16_t cpu = CpuF32ToF16(CpuF16ToF32(a) * CpuF16ToF32(b));
      if (f16_is_nan(cpu) ? ours != kF16CanonicalNaN : ours != cpu) {
        return Finding{"independent/f16-mul", fmt::format("f16_mul(0x{:04x}, 0x{:04x}) = 0x{:04x}, the CPU says 0x{:04x}",
                                                          a, b, ours, cpu)};
      }
    }
  }
  return std::nullopt;
}

CheckResult CheckSm90Steps(const Sample& sample) {
  const std::vector<uint16_t>& h = sample.f16;
  for (size_t i = 0; i + 8 <= h.size(); i += 4) {
    uint16_t a[4] = {h[i], h[i + 1], h[i + 2], h[i + 3]};
    const uint16_t* b = &h[i + 4];
    if ((i / 4) % 3 == 0) a[0] = 0x8000;  // a -0 product, which the first fma turns into +0
    const uint32_t c = sample.accumulators[(i / 4) % sample.accumulators.size()];
    for (StepModel model : {StepModel::kSm90Emulated, StepModel::kSm90EmulatedFtz}) {
      const uint32_t ours = Step(model, c, std::span<const uint16_t, 4>(a, 4), std::span<const uint16_t, 4>(b, 4));
      const uint32_t libm = FmafChain(c, a, b, model == StepModel::kSm90EmulatedFtz);
      if (ours != libm) {
        return Finding{fmt::format("independent/{}-step", StepModelName(model)),
                       fmt::format("{} step of c 0x{:08x}, a {:04x} {:04x} {:04x} {:04x}, b {:04x} {:04x} {:04x} "
                                   "{:04x} gives 0x{:08x}, a chain of the C library's fmaf 0x{:08x}",
                                   StepModelName(model), c, a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3], ours,
                                   libm)};
      }
    }
  }
  return std::nullopt;
}

struct ParsedVectors {
  const RecordedVectors* source;
  VectorFile file;
};

const std::vector<ParsedVectors>& ParsedRecordings() {
  static const std::vector<ParsedVectors> parsed = [] {
    std::vector<ParsedVectors> all;
    for (const RecordedVectors& vectors : CompiledInVectors()) {
      absl::StatusOr<VectorFile> file = ParseVectorFile(vectors.text, vectors.name);
      if (!file.ok()) {  // the repository's own file: a broken build, not a finding
        std::fprintf(stderr, "mxdiff: compiled-in %s: %s\n", std::string(vectors.name).c_str(),
                     file.status().ToString().c_str());
        std::abort();
      }
      all.push_back({&vectors, *std::move(file)});
    }
    return all;
  }();
  return parsed;
}

CheckResult CheckRecordedVectorRow(const FuzzCase& c) {
  uint64_t hash = kFnv1a64Basis ^ uint64_t(c.n) ^ (uint64_t(c.k) << 20);
  for (uint16_t h : c.activations) hash = (hash ^ h) * kFnv1a64Prime;
  for (const ParsedVectors& recording : ParsedRecordings()) {
    const VectorRow& row = recording.file.rows[hash % recording.file.rows.size()];
    const uint32_t got = EvaluateVectorRow(recording.source->model, row);
    if (!VectorResultMatches(row.d, got)) {
      return Finding{fmt::format("vectors/{}", StepModelName(recording.source->model)),
                     fmt::format("{} line {}: the device recorded 0x{:08x}, the {} model gives 0x{:08x}",
                                 recording.source->name, row.line, row.d, StepModelName(recording.source->model),
                                 got)};
    }
  }
  return std::nullopt;
}

}  // namespace

size_t RecordedVectorRows() {
  size_t rows = 0;
  for (const ParsedVectors& recording : ParsedRecordings()) rows += recording.file.rows.size();
  return rows;
}

CheckResult CheckAgainstIndependentArithmetic(const FuzzCase& c) {
  if (CheckResult finding = CheckRecordedVectorRow(c)) return finding;
  if (!CpuHasF16c()) return std::nullopt;
  const Sample sample = RareClassSample(c);
  if (CheckResult finding = CheckFp16Helpers(sample)) return finding;
  return CheckSm90Steps(sample);
}

}  // namespace mxdiff::fuzz
