// fuzz_gemm's harness: one case through every loaded module against the reference.
// Per module: output poisoned before the run, the reported route checked against the
// dispatch rules, every element written, output bits equal to the reference for the route
// that ran, the same case run twice (determinism), device health after the case; across
// modules: ordinary and folded bit-identical where folded ran on an admitted layer. With no
// module (no GPU, no external library) the CPU side still runs: the reference for both
// transforms, single- and multi-threaded, must agree with itself.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "fuzz/case_format.h"
#include "fuzz/findings.h"
#include "fuzz/modules/gemm_module.h"

namespace mxdiff::fuzz {

// No kernel writes this: every NaN a kernel produces is the canonical 0x7FFF (FACTS.md §3).
inline constexpr uint16_t kOutputPoison = 0x7E5A;
// GemmRunner::Run fills its device output with this NaN before every launch (gemm_runner.h).
inline constexpr uint16_t kRunnerPoison = 0xFFFF;

class GemmDifferential {
 public:
  explicit GemmDifferential(std::vector<std::unique_ptr<GemmModule>> modules);

  CheckResult CheckCase(const FuzzCase& fuzz_case);

  const std::vector<std::unique_ptr<GemmModule>>& modules() const { return modules_; }
  // Cases in which at least one module ran, and module runs skipped as unsupported.
  size_t cases_compared() const { return cases_compared_; }
  size_t runs_unsupported() const { return runs_unsupported_; }

 private:
  struct ReferenceKey {
    Transform transform;
    StepModel model;
    int cta_k;
    int splits;
    auto operator<=>(const ReferenceKey&) const = default;
  };
  absl::StatusOr<const std::vector<uint16_t>*> Reference(const FuzzCase& fuzz_case, const ReferenceKey& key);
  CheckResult CheckCpuSide(const FuzzCase& fuzz_case);

  std::vector<std::unique_ptr<GemmModule>> modules_;
  std::map<ReferenceKey, std::vector<uint16_t>> reference_cache_;
  size_t cases_compared_ = 0;
  size_t runs_unsupported_ = 0;
};

// "a=0" / "a=17" / "a>=18" / "a=1..16": the most unusual adjusted-exponent class among the
// scale bytes of the weight column behind an output element (the signature's last part).
std::string ScaleClassOfColumn(const FuzzCase& fuzz_case, int row, int column);

// ulp distance between two fp16 bit patterns on the ordered number line (NaN: 65536).
int F16UlpDistance(uint16_t a, uint16_t b);

}  // namespace mxdiff::fuzz
