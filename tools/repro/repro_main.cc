// repro FILE: replays one fuzz case (typically a finding) and explains it. Prints the case, the
// verdict of every CPU property (fuzz_transform, fuzz_dispatch, fuzz_reference), the route, and
// for every kernel module available (the builtin kernels where a GPU exists, --external) the
// first mismatching elements against the reference with the first divergent accumulation
// step. Exit status: 0 reproduced clean, 1 a mismatch or other finding reproduced, 2 bad input.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "fmt/format.h"
#include "fuzz/case_format.h"
#include "fuzz/dispatch_target.h"
#include "fuzz/findings.h"
#include "fuzz/gemm_differential.h"
#include "fuzz/modules/external_module.h"
#include "fuzz/reference_target.h"
#include "fuzz/transform_target.h"
#include "reference/admission.h"
#include "reference/reference_gemm.h"
#include "tools/repro/kernel_modules.h"

ABSL_FLAG(bool, emit, false, "copy the case into the regressions folder as <target>.<signature>.<hash>.case");
ABSL_FLAG(std::string, regressions, MXDIFF_REGRESSIONS_DIR, "the folder --emit writes into");
ABSL_FLAG(std::string, external, "", "also run this external kernel library (fuzz/modules/mxdiff_kernel_abi.h)");
ABSL_FLAG(int, show, 8, "mismatching elements printed per module");

namespace mxdiff::repro {
namespace {

constexpr int kExitClean = 0;
constexpr int kExitReproduced = 1;
constexpr int kExitBadInput = 2;

struct TargetFinding {
  std::string target;
  fuzz::Finding finding;
};

std::string Bits16(uint16_t bits) { return fmt::format("0x{:04x} ({})", bits, f16_to_f32(bits)); }
std::string Bits32(uint32_t bits) { return fmt::format("0x{:08x} ({})", bits, bits_to_f32(bits)); }

std::string StepText(const TraceStep& step) {
  return step.k < 0 ? fmt::format("reduction add of split {}", step.split)
                    : fmt::format("split {} k {}..{}", step.split, step.k, step.k + 3);
}

// Which arithmetic (or transform) reproduces the kernel's bits, and where its trace leaves the
// reference's.
void ExplainElement(const fuzz::FuzzCase& c, Transform transform, StepModel model, const Tactic& tactic, int row,
                    int column, uint16_t kernel_bits) {
  ReferenceOptions options;
  options.transform = transform;
  options.model = model;
  options.tactic = tactic;
  const absl::StatusOr<ElementTrace> reference = TraceElement(c.Problem(), options, row, column);
  if (!reference.ok()) {
    fmt::print("    trace unavailable: {}\n", reference.status().ToString());
    return;
  }
  for (Transform t : {transform, transform == Transform::kOrdinary ? Transform::kFolded : Transform::kOrdinary}) {
    for (StepModel m : kAllStepModels) {
      if (t == transform && m == model) continue;
      options.transform = t;
      options.model = m;
      const absl::StatusOr<ElementTrace> other = TraceElement(c.Problem(), options, row, column);
      if (!other.ok() || other->result_f16 != kernel_bits) continue;
      fmt::print("    the kernel's value is what the {} transform under the {} model gives\n", TransformName(t),
                 StepModelName(m));
      for (size_t i = 0; i < reference->steps.size() && i < other->steps.size(); ++i) {
        if (reference->steps[i].accumulator == other->steps[i].accumulator) continue;
        fmt::print("    first divergent accumulation step: {}: reference {} vs {} {}\n", StepText(reference->steps[i]),
                   Bits32(reference->steps[i].accumulator), StepModelName(m), Bits32(other->steps[i].accumulator));
        return;
      }
      fmt::print("    (the traces differ only in the final rounding)\n");
      return;
    }
  }
  fmt::print("    no step model and no transform reproduces {}; the reference's last steps:\n", Bits16(kernel_bits));
  const size_t first = reference->steps.size() > 3 ? reference->steps.size() - 3 : 0;
  for (size_t i = first; i < reference->steps.size(); ++i) {
    fmt::print("      {}: {}\n", StepText(reference->steps[i]), Bits32(reference->steps[i].accumulator));
  }
}

void CompareModule(fuzz::GemmModule& module, const fuzz::FuzzCase& c, int show) {
  const Tactic tactic = module.MapTactic(c);
  const StepModel model = module.model().value_or(c.model);
  const absl::StatusOr<Route> expected = module.ExpectedRoute(c, tactic);
  std::vector<uint16_t> output(size_t(c.rows()) * size_t(c.n), fuzz::kOutputPoison);
  const absl::StatusOr<Route> route = module.Run(c, tactic, output);
  fmt::print("\nmodule {} (tactic {}, model {}):\n", module.name(), TacticName(tactic), StepModelName(model));
  fmt::print("  route expected: {}\n",
             expected.ok() ? fmt::format("{} ({})", TransformName(expected->variant), RouteReasonName(expected->reason))
                           : expected.status().ToString());
  if (!route.ok()) {
    fmt::print("  run: {}\n", route.status().ToString());
    return;
  }
  fmt::print("  route taken:    {} ({}) {}\n", TransformName(route->variant), RouteReasonName(route->reason),
             route->detail);
  ReferenceOptions options;
  options.transform = route->variant;
  options.model = model;
  options.tactic = route->tactic;
  std::vector<uint16_t> reference;
  if (absl::Status status = ReferenceGemm(c.Problem(), options, reference); !status.ok()) {
    fmt::print("  reference: {}\n", status.ToString());
    return;
  }
  size_t mismatches = 0;
  for (size_t i = 0; i < output.size(); ++i) {
    if (output[i] == reference[i]) continue;
    const int row = int(i / size_t(c.n)), column = int(i % size_t(c.n));
    if (int(mismatches) < show) {
      fmt::print("  mismatch [{}][{}] (index {}): kernel {} reference {} {} ulp, scales {}\n", row, column, i,
                 Bits16(output[i]), Bits16(reference[i]), fuzz::F16UlpDistance(output[i], reference[i]),
                 fuzz::ScaleClassOfColumn(c, row, column));
      if (mismatches == 0) ExplainElement(c, route->variant, model, route->tactic, row, column, output[i]);
    }
    ++mismatches;
  }
  fmt::print("  {} of {} elements differ from the reference\n", mismatches, output.size());
}

std::string TargetFromFileName(const std::string& path) {
  const std::string name = std::filesystem::path(path).filename().string();
  for (const char* target : {"fuzz_transform", "fuzz_dispatch", "fuzz_reference", "fuzz_gemm"}) {
    if (name.rfind(std::string(target) + ".", 0) == 0) return target;
  }
  return "fuzz_gemm";
}

int Run(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    fmt::print(stderr, "repro: cannot read {}\n", path);
    return kExitBadInput;
  }
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  absl::StatusOr<fuzz::FuzzCase> decoded = fuzz::DecodeCase(bytes);
  if (!decoded.ok()) {
    fmt::print(stderr, "repro: {} is not a valid case: {}\n", path, decoded.status().ToString());
    return kExitBadInput;
  }
  const fuzz::FuzzCase& c = *decoded;
  fmt::print("{}\n{}", path, fuzz::DescribeCase(c));
  const LayerAdmission admission = AdmitLayer(c.scale_bytes);
  fmt::print("  admission: {}\n\n", admission.Describe());

  std::vector<TargetFinding> findings;
  const std::pair<const char*, fuzz::CheckResult (*)(const fuzz::FuzzCase&)> cpu_targets[] = {
      {"fuzz_transform", fuzz::CheckTransformCase},
      {"fuzz_dispatch", fuzz::CheckDispatchCase},
      {"fuzz_reference", fuzz::CheckReferenceCase},
  };
  for (const auto& [target, check] : cpu_targets) {
    const fuzz::CheckResult finding = check(c);
    fmt::print("{:<15} {}\n", target, finding ? "FINDING " + finding->signature + "\n  " + finding->description : "ok");
    if (finding) findings.push_back({target, *finding});
  }
  if (!c.registry.empty()) {
    const absl::StatusOr<Route> route =
        DecideRoute(c.Registry(), c.tactic, c.request, c.policy, admission.admitted, admission.Describe());
    fmt::print("route over the case's registry: {}\n",
               route.ok() ? fmt::format("{} ({}) {}", TransformName(route->variant), RouteReasonName(route->reason),
                                        route->detail)
                          : route.status().ToString());
  }

  GpuModules gpu = LoadGpuModules();
  fmt::print("\n{}\n", gpu.note);
  if (gpu.calibration_failed) findings.push_back({"fuzz_gemm", {"calibration/failed", gpu.note}});
  if (const std::string library = absl::GetFlag(FLAGS_external); !library.empty()) {
    absl::StatusOr<std::unique_ptr<fuzz::GemmModule>> external = fuzz::LoadExternalModule(library);
    if (!external.ok()) {
      fmt::print(stderr, "repro: {}\n", external.status().ToString());
      return kExitBadInput;
    }
    gpu.modules.push_back(*std::move(external));
  }
  fuzz::GemmDifferential differential(std::move(gpu.modules));
  const fuzz::CheckResult gemm_finding = differential.CheckCase(c);
  fmt::print("fuzz_gemm       {}{}\n", gemm_finding ? "FINDING " + gemm_finding->signature + "\n  " +
                                                          gemm_finding->description
                                                    : "ok",
             differential.modules().empty() ? " (CPU side only: the reference against itself)" : "");
  if (gemm_finding) findings.push_back({"fuzz_gemm", *gemm_finding});
  for (const std::unique_ptr<fuzz::GemmModule>& module : differential.modules()) {
    CompareModule(*module, c, absl::GetFlag(FLAGS_show));
  }

  if (absl::GetFlag(FLAGS_emit)) {
    const std::string target = findings.empty() ? TargetFromFileName(path) : findings.front().target;
    const fuzz::Finding finding = findings.empty() ? fuzz::Finding{"clean", ""} : findings.front().finding;
    setenv("MXDIFF_FINDINGS_DIR", absl::GetFlag(FLAGS_regressions).c_str(), 1);
    absl::StatusOr<std::string> written = fuzz::WriteFinding(target, bytes, finding);
    if (!written.ok()) {
      fmt::print(stderr, "repro: --emit failed: {}\n", written.status().ToString());
      return kExitBadInput;
    }
    // The regression folder holds cases only; the description is in the finding's own .txt.
    std::filesystem::remove(written->substr(0, written->size() - 5) + ".txt");
    fmt::print("\nemitted {}\n", *written);
  }
  fmt::print("\n{}\n", findings.empty() ? "reproduced clean" : fmt::format("{} finding(s) reproduced", findings.size()));
  return findings.empty() ? kExitClean : kExitReproduced;
}

}  // namespace
}  // namespace mxdiff::repro

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "repro FILE [--emit] [--external=LIB.so]: replays a fuzz case and explains it.\n"
      "Exit status: 0 reproduced clean, 1 mismatch (or other finding) reproduced, 2 bad input.");
  const std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() != 2) {
    fmt::print(stderr, "usage: repro FILE [--emit] [--external=LIB.so] [--regressions=DIR] [--show=N]\n");
    return 2;
  }
  return mxdiff::repro::Run(positional[1]);
}
