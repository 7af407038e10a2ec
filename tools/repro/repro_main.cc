// repro FILE: replays one fuzz case (typically a finding) and explains it. Prints the case, the
// verdict of every CPU property (fuzz_transform, fuzz_dispatch, fuzz_reference), the route, and
// for every kernel module available (the builtin kernels where a GPU exists, --external) the
// first mismatching elements against the reference with the first divergent accumulation
// step. Exit status: 0 reproduced clean, 1 a mismatch or other finding reproduced, 2 bad input.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/marshalling.h"
#include "nlohmann/json.hpp"
#include "fmt/format.h"
#include "fuzz/formats/case_format.h"
#include "fuzz/mutators/case_minimizer.h"
#include "fuzz/driver/findings.h"
#include "fuzz/driver/fuzz_target.h"
#include "fuzz/checks/gemm_differential.h"
#include "fuzz/formats/layer_case_format.h"
#include "fuzz/checks/layer_target.h"
#include "fuzz/modules/module_loader.h"
#include "fuzz/modules/reference_oracle.h"
#include "reference/admission.h"
#include "reference/reference_gemm.h"
#include "tools/cli/checked_output.h"
#include "tools/cli/command_line.h"
#include "checkpoint/json_bytes.h"
#include "tools/cli/input_file.h"
#include "tools/repro/layer_repro.h"

ABSL_FLAG(bool, emit, false, "copy the case into the regressions folder as <target>.<signature>.<hash>.case");
ABSL_FLAG(std::string, regressions, MXDIFF_REGRESSIONS_DIR, "the folder --emit writes into");
ABSL_FLAG(std::string, external, "", "also run this external kernel library (fuzz/modules/mxdiff_kernel_abi.h)");
ABSL_FLAG(int, show, 8, "mismatching elements printed per module");
ABSL_FLAG(std::vector<std::string>, modules, {}, "only these kernel modules (fuzz/README.md: choosing modules)");
ABSL_FLAG(std::vector<std::string>, disable_modules, {}, "all kernel modules but these");
ABSL_FLAG(bool, json, false, "print the verdict as JSON on stdout (the readable text goes to stderr)");
ABSL_FLAG(bool, minimize, false, "shrink the case while its first finding keeps its signature; write FILE.min");
ABSL_FLAG(int, minimize_evaluations, 400, "at most this many candidate cases with --minimize");
ABSL_FLAG(std::string, sequence, "",
          "replay the *.case files of this folder in name order in one process (a finding's <...>.sequence)");

namespace mxdiff::repro {
namespace {

constexpr int kExitClean = 0;
constexpr int kExitReproduced = 1;
constexpr int kExitBadInput = 2;

struct TargetFinding {
  std::string target;
  fuzz::Finding finding;
  std::string check;   // fuzz_gemm's named check
  std::string module;
};

// Human text: stdout, or stderr with --json (stdout then holds the verdict alone).
std::FILE* text = stdout;

std::string Bits16(uint16_t bits) { return fmt::format("0x{:04x} ({})", bits, f16_to_f32(bits)); }
std::string Bits32(uint32_t bits) { return fmt::format("0x{:08x} ({})", bits, bits_to_f32(bits)); }

std::string StepText(const TraceStep& step) {
  return step.k < 0 ? fmt::format("reduction add of split {}", step.split)
                    : fmt::format("split {} k {}..{}", step.split, step.k, step.k + 3);
}

// How far apart two fp16 results are, in words: NaN against NaN differs only in the payload
// (an ulp distance means nothing there), NaN against a number is not a distance either.
std::string Distance(uint16_t kernel, uint16_t reference) {
  if (f16_is_nan(kernel) && f16_is_nan(reference)) return "NaN payload difference (both NaN)";
  if (f16_is_nan(kernel) != f16_is_nan(reference)) return "NaN against a number";
  return fmt::format("{} ulp", fuzz::F16UlpDistance(kernel, reference));
}

struct Arithmetic {
  Transform transform;
  StepModel model;
  size_t reproduced = 0;  // of the module's mismatching elements, how many it gives bit for bit
};

// Every arithmetic (transform x step model) other than the reference's, ranked by how many of the
// kernel's mismatching elements it reproduces bit for bit, ties broken toward the model the module
// follows (the case's own for an external kernel), then the case's model field, then the same
// transform. Several models often agree on an element (v100 and exact differ only where truncation
// shows), so the whole output decides, and every arithmetic that reproduces anything is listed.
std::vector<Arithmetic> ReproducingArithmetics(const fuzz::FuzzCase& c, Transform transform, StepModel model,
                                               const Tactic& tactic, std::span<const uint16_t> output,
                                               std::span<const size_t> mismatches) {
  std::vector<Arithmetic> found;
  for (Transform t : {Transform::kOrdinary, Transform::kFolded}) {
    for (StepModel m : kAllStepModels) {
      if (t == transform && m == model) continue;
      ReferenceOptions options;
      options.transform = t;
      options.model = m;
      options.tactic = tactic;
      std::vector<uint16_t> other;
      if (!ReferenceGemm(c.Problem(), options, other).ok()) continue;
      Arithmetic a{t, m};
      for (size_t i : mismatches) a.reproduced += other[i] == output[i] ? 1 : 0;
      if (a.reproduced > 0) found.push_back(a);
    }
  }
  auto preference = [&](const Arithmetic& a) {
    return (a.model == model ? 0 : a.model == c.model ? 2 : 4) + (a.transform == transform ? 0 : 1);
  };
  std::stable_sort(found.begin(), found.end(), [&](const Arithmetic& a, const Arithmetic& b) {
    return a.reproduced != b.reproduced ? a.reproduced > b.reproduced : preference(a) < preference(b);
  });
  return found;
}

std::string ArithmeticName(const Arithmetic& a, StepModel module_model, StepModel case_model) {
  std::string text = fmt::format("{} under {}", TransformName(a.transform), StepModelName(a.model));
  if (a.model == module_model) text += " (the module's model)";
  else if (a.model == case_model) text += " (the case's model)";
  return text;
}

// Where the best reproducing arithmetic's trace of one element leaves the reference's.
void ExplainElement(const fuzz::FuzzCase& c, const Arithmetic& reference_arithmetic, const Arithmetic* best,
                    StepModel module_model, const Tactic& tactic, int row, int column, uint16_t kernel_bits,
                    uint16_t reference_bits) {
  if (f16_is_nan(kernel_bits) && f16_is_nan(reference_bits)) {
    fmt::print(text, "    both are NaN: the kernel's payload is 0x{:04x}, the reference's 0x{:04x}; every model gives the "
               "canonical NaN, so the kernel writes a NaN no model writes\n",
               kernel_bits, reference_bits);
    return;
  }
  ReferenceOptions options;
  options.transform = reference_arithmetic.transform;
  options.model = reference_arithmetic.model;
  options.tactic = tactic;
  const absl::StatusOr<ElementTrace> reference = TraceElement(c.Problem(), options, row, column);
  if (!reference.ok()) {
    fmt::print(text, "    trace unavailable: {}\n", reference.status().ToString());
    return;
  }
  absl::StatusOr<ElementTrace> other = absl::NotFoundError("no arithmetic");
  if (best != nullptr) {
    options.transform = best->transform;
    options.model = best->model;
    other = TraceElement(c.Problem(), options, row, column);
  }
  if (!other.ok() || other->result_f16 != kernel_bits) {
    fmt::print(text, "    no step model and no transform reproduces {} here; the reference's last steps:\n",
               Bits16(kernel_bits));
    const size_t first = reference->steps.size() > 3 ? reference->steps.size() - 3 : 0;
    for (size_t i = first; i < reference->steps.size(); ++i) {
      fmt::print(text, "      {}: {}\n", StepText(reference->steps[i]), Bits32(reference->steps[i].accumulator));
    }
    return;
  }
  const std::string name = ArithmeticName(*best, module_model, c.model);
  for (size_t i = 0; i < reference->steps.size() && i < other->steps.size(); ++i) {
    if (reference->steps[i].accumulator == other->steps[i].accumulator) continue;
    fmt::print(text, "    first divergent accumulation step, against {}: {}: reference {} vs {}\n", name,
               StepText(reference->steps[i]), Bits32(reference->steps[i].accumulator),
               Bits32(other->steps[i].accumulator));
    return;
  }
  fmt::print(text, "    against {}: the traces differ only in the final rounding\n", name);
}

// Explains the bits the named checks judged: the module's own run, never a second one.
void ExplainRun(const fuzz::ModuleRun& run, const fuzz::FuzzCase& c, int show) {
  const StepModel model = run.model;
  fmt::print(text, "\nmodule {} (tactic {}, model {}):\n", run.module, TacticName(run.tactic), StepModelName(model));
  fmt::print(text, "  route expected: {}\n",
             run.expected.ok() ? fmt::format("{} ({})", TransformName(run.expected->variant),
                                             RouteReasonName(run.expected->reason))
                               : run.expected.status().ToString());
  if (run.unsupported) {
    fmt::print(text, "  the module does not support this case (not a finding)\n");
    return;
  }
  if (!run.route.ok()) {
    fmt::print(text, "  run: {}\n", run.route.status().ToString(absl::StatusToStringMode::kWithNoExtraData));
    return;
  }
  const absl::StatusOr<Route>& route = run.route;
  fmt::print(text, "  route taken:    {} ({}) {}\n", TransformName(route->variant), RouteReasonName(route->reason),
             route->detail);
  if (run.reference.empty() && !run.output.empty()) {
    fmt::print(text, "  (not compared: an earlier check of this module found something)\n");
    return;
  }
  const std::vector<uint16_t>& output = run.output;
  const std::vector<uint16_t>& reference = run.reference;
  std::vector<size_t> mismatches;
  for (size_t i = 0; i < output.size(); ++i) {
    if (output[i] != reference[i]) mismatches.push_back(i);
  }
  fmt::print(text, "  {} of {} elements differ from the reference ({} {})\n", mismatches.size(), output.size(),
             TransformName(route->variant), StepModelName(model));
  if (mismatches.empty()) return;
  const std::vector<Arithmetic> reproducing =
      ReproducingArithmetics(c, route->variant, model, route->tactic, output, mismatches);
  if (reproducing.empty()) {
    fmt::print(text, "  no other step model or transform reproduces any of them\n");
  } else {
    fmt::print(text, "  other arithmetics that reproduce the kernel's bits:\n");
    for (const Arithmetic& a : reproducing) {
      fmt::print(text, "    {}: {} of the {} mismatching elements\n", ArithmeticName(a, model, c.model), a.reproduced,
                 mismatches.size());
    }
  }
  for (size_t shown = 0; shown < mismatches.size() && int(shown) < show; ++shown) {
    const size_t i = mismatches[shown];
    const int row = int(i / size_t(c.n)), column = int(i % size_t(c.n));
    fmt::print(text, "  mismatch [{}][{}] (index {}): kernel {} reference {} {}, scales {}\n", row, column, i,
               Bits16(output[i]), Bits16(reference[i]), Distance(output[i], reference[i]),
               fuzz::ScaleClassOfColumn(c, row, column));
    if (shown == 0) {
      ExplainElement(c, Arithmetic{route->variant, model}, reproducing.empty() ? nullptr : &reproducing.front(),
                     model, route->tactic, row, column, output[i], reference[i]);
    }
  }
}

// The target a file's name starts with (fuzz/targets/registry.cc), else fuzz_gemm.
std::string TargetFromFileName(const std::string& path) {
  const fuzz::FuzzTarget* target = fuzz::TargetOfFileName(std::filesystem::path(path).filename().string());
  return std::string(target != nullptr ? target->name : "fuzz_gemm");
}

// At most fuzz::MaxEncodedSize() + 1 bytes are read, so /dev/zero or a huge file is rejected at once.
absl::StatusOr<std::vector<uint8_t>> ReadCaseFile(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    return absl::InvalidArgumentError(fmt::format("{} is a directory, not a case file", path));
  }
  if (absl::Status refused = cli::RefuseStreamInput(path); !refused.ok()) return refused;  // a FIFO would hang
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  const size_t limit = fuzz::MaxEncodedSize();
  std::vector<uint8_t> bytes(limit + 1);
  size_t size = 0;
  while (size < bytes.size() && in) {
    in.read(reinterpret_cast<char*>(bytes.data() + size), std::streamsize(bytes.size() - size));
    size += size_t(in.gcount());
  }
  if (in.bad()) return absl::DataLossError(fmt::format("cannot read {}: read error", path));
  if (size > limit) {
    return absl::InvalidArgumentError(
        fmt::format("{} is not a valid case: larger than any case can be ({} bytes at most)", path, limit));
  }
  bytes.resize(size);
  return bytes;
}

// The mutations that produced a finding, from its sidecar <name>.txt beside <name>.case
// (fuzz/driver/findings.h: `mutations:`); empty without one.
std::string SidecarMutations(const std::string& path) {
  if (!path.ends_with(".case")) return "";
  std::ifstream sidecar(path.substr(0, path.size() - 5) + ".txt");
  for (std::string line; std::getline(sidecar, line);) {
    if (line.starts_with("mutations: ")) return line.substr(11);
  }
  return "";
}

// Everything the flags ask for is checked before the case runs: no work is done for a command
// line that cannot finish.
absl::Status ValidateFlags() {
  if (absl::GetFlag(FLAGS_show) < 0) {
    return absl::InvalidArgumentError(fmt::format("--show={} must be >= 0", absl::GetFlag(FLAGS_show)));
  }
  if (absl::GetFlag(FLAGS_minimize_evaluations) < 1) {
    return absl::InvalidArgumentError(fmt::format("--minimize-evaluations={} must be >= 1",
                                                  absl::GetFlag(FLAGS_minimize_evaluations)));
  }
  if (absl::GetFlag(FLAGS_emit)) {
    const std::string dir = absl::GetFlag(FLAGS_regressions);
    std::error_code error;
    if (!std::filesystem::is_directory(dir, error)) {
      return absl::InvalidArgumentError(fmt::format(
          "--emit: the regressions folder {} {}; create it first (repro writes only into an existing folder)", dir,
          std::filesystem::exists(dir, error) ? "is not a directory" : "does not exist"));
    }
  }
  return absl::OkStatus();
}

// The CPU properties repro checks on every GEMM case: the registry's cpu targets of the case
// format (fuzz/driver/fuzz_target.h), each with every finding of its checks.
std::vector<TargetFinding> CpuTargetFindings(std::span<const uint8_t> bytes, bool print) {
  std::vector<TargetFinding> found;
  for (const fuzz::FuzzTarget* target : fuzz::Registry()) {
    if (target->options.kind != "cpu" || target->format != "case") continue;
    const fuzz::InputFindings findings = target->check(bytes, /*fresh=*/false);
    const fuzz::CheckResult first = findings ? fuzz::FirstFindingOf(*findings) : std::nullopt;
    if (print) {
      fmt::print(text, "{:<15} {}\n", target->name,
                 first ? "FINDING " + first->signature + "\n  " + first->description : "ok");
    }
    if (first) found.push_back({std::string(target->name), *first});
  }
  return found;
}

// fuzz_gemm's modules as the flags select them. A device that matches no step model is a finding
// of its own (appended to `findings`): nothing it computes can be judged, so no module is loaded.
absl::StatusOr<fuzz::LoadedModules> LoadSelectedModules(std::vector<TargetFinding>& findings) {
  fuzz::ModuleSelection selection{absl::GetFlag(FLAGS_modules), absl::GetFlag(FLAGS_disable_modules),
                                  absl::GetFlag(FLAGS_external)};
  absl::StatusOr<fuzz::LoadedModules> loaded = fuzz::LoadModules(selection);
  if (!loaded.ok() && loaded.status().code() == absl::StatusCode::kFailedPrecondition) {
    findings.push_back({"fuzz_gemm", {"calibration/no-model", std::string(loaded.status().message())}});
    loaded = fuzz::LoadedModules{{}, std::string(loaded.status().message()) + "\n"};
  }
  return loaded;
}

// The finding's signature, recomputed on another case by the check that found it.
std::optional<std::string> SignatureOf(const TargetFinding& finding, const fuzz::FuzzCase& c,
                                       fuzz::GemmDifferential& differential) {
  fuzz::CheckResult again;
  const fuzz::FuzzTarget* target = fuzz::FindTarget(finding.target);
  if (target != nullptr && target->options.kind == "cpu") {
    const absl::StatusOr<std::vector<uint8_t>> bytes = fuzz::EncodeCase(c);
    const fuzz::InputFindings findings = bytes.ok() ? target->check(*bytes, /*fresh=*/false) : std::nullopt;
    if (findings) again = fuzz::FirstFindingOf(*findings);
  } else {
    // The evaluation outlives the pointer FirstFinding returns into it.
    const fuzz::CaseEvaluation evaluation = differential.Evaluate(c);
    if (const fuzz::CheckVerdict* first = evaluation.FirstFinding()) again = first->finding;
  }
  if (!again) return std::nullopt;
  return again->signature;
}

int Minimize(const std::string& path, const fuzz::FuzzCase& c, const TargetFinding& finding,
             fuzz::GemmDifferential& differential) {
  fuzz::MinimizeOptions options;
  options.max_evaluations = absl::GetFlag(FLAGS_minimize_evaluations);
  const fuzz::MinimizeResult result = fuzz::MinimizeCase(
      c, [&](const fuzz::FuzzCase& candidate) { return SignatureOf(finding, candidate, differential) == finding.finding.signature; },
      options);
  absl::StatusOr<std::vector<uint8_t>> bytes = fuzz::EncodeCase(result.minimized);
  const std::string out = path + ".min";
  if (bytes.ok()) {
    std::ofstream file(out, std::ios::binary);
    file.write(reinterpret_cast<const char*>(bytes->data()), std::streamsize(bytes->size()));
    file.close();  // a write error shows at the flush
    if (!file) bytes = absl::PermissionDeniedError(fmt::format("cannot write {}", out));
  }
  if (!bytes.ok()) {
    fmt::print(stderr, "repro: --minimize: {}\n", bytes.status().ToString());
    return kExitBadInput;
  }
  fmt::print(text, "\nminimized (signature {} kept; {} edits of {} candidates{}): {}\n{}", finding.finding.signature,
             result.accepted, result.evaluations, result.exhausted ? ", budget spent" : "", out,
             fuzz::DescribeCase(result.minimized));
  return kExitClean;
}

// fuzz_gemm's oracle (fuzz/README.md, "fuzz_gemm's oracle"): the device reference for large cases
// where there is one, 1 in 16 of them (the same cases as fuzz_gemm's default) also on the CPU, so
// an oracle/device-vs-cpu finding replays; the CPU reference alone elsewhere.
std::unique_ptr<fuzz::ReferenceOracle> DeviceOracleOrNone() {
  absl::StatusOr<std::unique_ptr<fuzz::ReferenceOracle>> oracle = fuzz::MakeDeviceReferenceOracle();
  return oracle.ok() ? *std::move(oracle) : nullptr;
}

// repro --json: tools/repro/README.md documents the fields.
void PrintJsonVerdict(const std::string& path, const fuzz::CaseEvaluation& evaluation,
                      const std::vector<TargetFinding>& findings, int status) {
  nlohmann::json verdict = {{"file", path}, {"exit_status", status}, {"reproduced", !findings.empty()},
                            {"mutations", SidecarMutations(path)}};
  verdict["findings"] = nlohmann::json::array();
  for (const TargetFinding& f : findings) {
    verdict["findings"].push_back({{"target", f.target}, {"check", f.check}, {"module", f.module},
                                   {"signature", f.finding.signature}, {"description", f.finding.description}});
  }
  verdict["checks"] = nlohmann::json::array();
  for (const fuzz::CheckVerdict& v : evaluation.verdicts) {
    verdict["checks"].push_back({{"check", std::string(v.check)}, {"module", v.module},
                                 {"passed", !v.finding.has_value()},
                                 {"signature", v.finding ? v.finding->signature : ""}});
  }
  fmt::print("{}\n", cli::DumpJson(verdict, 2));
}

// The route DecideRoute takes over the case's own registry, where it has one.
void PrintRegistryRoute(const fuzz::FuzzCase& c, const LayerAdmission& admission) {
  if (c.registry.empty()) return;
  const absl::StatusOr<Route> route =
      DecideRoute(c.Registry(), c.tactic, c.request, c.policy, admission.admitted, admission.Describe());
  fmt::print(text, "route over the case's registry: {}\n",
             route.ok() ? fmt::format("{} ({}) {}", TransformName(route->variant), RouteReasonName(route->reason),
                                      route->detail)
                        : route.status().ToString());
}

// --emit: the case into the regressions folder under its first finding's target and signature.
bool Emit(const std::string& path, std::span<const uint8_t> bytes, const std::vector<TargetFinding>& findings) {
  const std::string target = findings.empty() ? TargetFromFileName(path) : findings.front().target;
  const fuzz::Finding finding = findings.empty() ? fuzz::Finding{"clean", ""} : findings.front().finding;
  setenv("MXDIFF_FINDINGS_DIR", absl::GetFlag(FLAGS_regressions).c_str(), 1);
  absl::StatusOr<std::string> written = fuzz::WriteFinding(target, bytes, finding);
  if (!written.ok()) {
    fmt::print(stderr, "repro: --emit failed: {}\n", written.status().ToString());
    return false;
  }
  // The regression folder holds cases only; the description is in the finding's own .txt.
  std::filesystem::remove(written->substr(0, written->size() - 5) + ".txt");
  fmt::print(text, "\nemitted {}\n", *written);
  return true;
}

int Run(const std::string& path) {
  if (absl::GetFlag(FLAGS_json)) text = stderr;
  if (absl::Status status = ValidateFlags(); !status.ok()) {
    fmt::print(stderr, "repro: {}\n", std::string(status.message()));
    return kExitBadInput;
  }
  const absl::StatusOr<std::vector<uint8_t>> read = ReadCaseFile(path);
  if (!read.ok()) {
    fmt::print(stderr, "repro: {}\n", std::string(read.status().message()));
    return kExitBadInput;
  }
  const std::vector<uint8_t>& bytes = *read;
  if (const std::string mutations = SidecarMutations(path); !mutations.empty()) {
    fmt::print(text, "reached by the mutations (its .txt): {}\n", mutations);
  }
  if (IsLayerCase(bytes)) {  // a fuzz_layer case (tools/repro/layer_repro.h)
    if (absl::GetFlag(FLAGS_minimize) || absl::GetFlag(FLAGS_json)) {  // not a silent no-op
      fmt::print(stderr, "repro: --{} works on GEMM cases; {} is a fuzz_layer case\n",
                 absl::GetFlag(FLAGS_minimize) ? "minimize" : "json", path);
      return kExitBadInput;
    }
    return ReproLayerCase(path, bytes, absl::GetFlag(FLAGS_emit), absl::GetFlag(FLAGS_regressions));
  }
  absl::StatusOr<fuzz::FuzzCase> decoded = fuzz::DecodeCase(bytes);
  if (!decoded.ok()) {
    fmt::print(stderr, "repro: {} is not a valid case: {}\n", path, decoded.status().ToString());
    return kExitBadInput;
  }
  const fuzz::FuzzCase& c = *decoded;
  fmt::print(text, "{}\n{}", path, fuzz::DescribeCase(c));
  const LayerAdmission admission = AdmitLayer(c.scale_bytes);
  fmt::print(text, "  admission: {}\n\n", admission.Describe());

  std::vector<TargetFinding> findings = CpuTargetFindings(bytes, /*print=*/true);
  PrintRegistryRoute(c, admission);

  absl::StatusOr<fuzz::LoadedModules> loaded = LoadSelectedModules(findings);
  if (!loaded.ok()) {
    fmt::print(stderr, "repro: {}\n", loaded.status().ToString());
    return kExitBadInput;
  }
  fmt::print(text, "\n{}", loaded->report);
  fuzz::GemmDifferential differential(std::move(loaded->modules), DeviceOracleOrNone());
  const fuzz::CaseEvaluation evaluation = differential.Evaluate(c);
  fmt::print(text, "fuzz_gemm checks{}:\n",
             differential.modules().empty() ? " (CPU side only: the reference against itself)" : "");
  for (const fuzz::CheckVerdict& verdict : evaluation.verdicts) {
    fmt::print(text, "  {:<13} {:<16} {}\n", verdict.check, verdict.module,
               verdict.finding ? "FINDING " + verdict.finding->signature + "\n    " + verdict.finding->description
                               : "ok");
  }
  if (const fuzz::CheckVerdict* first = evaluation.FirstFinding()) {
    findings.push_back({"fuzz_gemm", *first->finding, std::string(first->check), first->module});
  }
  for (const fuzz::ModuleRun& run : evaluation.runs) ExplainRun(run, c, absl::GetFlag(FLAGS_show));

  if (absl::GetFlag(FLAGS_minimize) && !findings.empty()) {
    if (int status = Minimize(path, c, findings.front(), differential); status != kExitClean) return status;
  } else if (absl::GetFlag(FLAGS_minimize)) {
    fmt::print(text, "\n--minimize: nothing to minimize (no finding reproduced); no {}.min written\n", path);
  }
  if (absl::GetFlag(FLAGS_emit) && !Emit(path, bytes, findings)) return kExitBadInput;
  fmt::print(text, "\n{}\n", findings.empty() ? "reproduced clean" : fmt::format("{} finding(s) reproduced", findings.size()));
  const int status = findings.empty() ? kExitClean : kExitReproduced;
  if (absl::GetFlag(FLAGS_json)) PrintJsonVerdict(path, evaluation, findings, status);
  return status;
}


// The *.case files of `dir`, in name order; an error when there are none or it cannot be listed.
absl::StatusOr<std::vector<std::string>> SequenceFiles(const std::string& dir) {
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error)) {
    return absl::InvalidArgumentError(std::filesystem::exists(dir, error) ? "not a directory" : "no such directory");
  }
  std::vector<std::string> files;
  for (std::filesystem::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    if (it->path().extension() == ".case") files.push_back(it->path().string());
  }
  if (error) return absl::InvalidArgumentError("cannot list it: " + error.message());
  if (files.empty()) return absl::InvalidArgumentError("holds no *.case file");
  std::sort(files.begin(), files.end());
  return files;
}

// What a sequence keeps from case to case: the modules and one layer differential.
struct SequenceReplay {
  fuzz::GemmDifferential differential;
  std::unique_ptr<fuzz::LayerDifferential> layer;  // opened at the first layer case
};

// The findings of one case of a sequence; nullopt when it does not decode.
std::optional<std::vector<TargetFinding>> SequenceCaseFindings(std::span<const uint8_t> input, SequenceReplay& replay) {
  std::vector<TargetFinding> found;
  if (IsLayerCase(input)) {
    const absl::StatusOr<fuzz::LayerCase> c = fuzz::DecodeLayerCase(input);
    if (!c.ok()) return std::nullopt;
    if (!replay.layer) replay.layer = std::make_unique<fuzz::LayerDifferential>(/*use_device=*/true);
    if (fuzz::CheckResult finding = replay.layer->CheckCase(*c)) found.push_back({"fuzz_layer", *finding});
    return found;
  }
  const absl::StatusOr<fuzz::FuzzCase> c = fuzz::DecodeCase(input);
  if (!c.ok()) return std::nullopt;
  found = CpuTargetFindings(input, /*print=*/false);
  const fuzz::CaseEvaluation evaluation = replay.differential.Evaluate(*c);
  if (const fuzz::CheckVerdict* first = evaluation.FirstFinding()) {
    found.push_back({"fuzz_gemm", *first->finding, std::string(first->check), first->module});
  }
  return found;
}

// One case of a sequence: its line of text and its JSON entry.
nlohmann::json ReplaySequenceCase(const std::string& name, std::span<const uint8_t> input, SequenceReplay& replay) {
  const std::optional<std::vector<TargetFinding>> found = SequenceCaseFindings(input, replay);
  nlohmann::json entry = {{"file", name}, {"kind", IsLayerCase(input) ? "layer" : "gemm"}, {"valid", found.has_value()},
                          {"findings", nlohmann::json::array()}};
  if (!found) {
    fmt::print(text, "{}: not a valid case (skipped, as the fuzz target skips it)\n", name);
  } else if (found->empty()) {
    fmt::print(text, "{}: ok\n", name);
  }
  for (const TargetFinding& f : found.value_or(std::vector<TargetFinding>{})) {
    fmt::print(text, "{}: FINDING {} ({}{})\n  {}\n", name, f.finding.signature, f.target,
               f.module.empty() ? "" : ", module " + f.module, f.finding.description);
    entry["findings"].push_back({{"target", f.target}, {"check", f.check}, {"module", f.module},
                                 {"signature", f.finding.signature}});
  }
  return entry;
}

// repro --sequence DIR: the *.case files of DIR in name order, in this one process: the same
// modules (loaded once) and the same device state throughout, as the worker ran them. Each case
// gets what `repro FILE` checks (GEMM cases: the CPU properties and fuzz_gemm's checks; layer
// cases: fuzz_layer's check on one layer differential). A file that does not decode is skipped, as
// the fuzz target skips it. Exit 1 if any case gave a finding.
int RunSequence(const std::string& dir) {
  if (absl::GetFlag(FLAGS_json)) text = stderr;
  if (absl::Status status = ValidateFlags(); !status.ok()) {
    fmt::print(stderr, "repro: {}\n", std::string(status.message()));
    return kExitBadInput;
  }
  if (absl::GetFlag(FLAGS_emit) || absl::GetFlag(FLAGS_minimize)) {
    fmt::print(stderr, "repro: --{} works on one case FILE, not with --sequence\n",
               absl::GetFlag(FLAGS_emit) ? "emit" : "minimize");
    return kExitBadInput;
  }
  const absl::StatusOr<std::vector<std::string>> listed = SequenceFiles(dir);
  if (!listed.ok()) {
    fmt::print(stderr, "repro: --sequence {}: {}\n", dir, std::string(listed.status().message()));
    return kExitBadInput;
  }
  const std::vector<std::string>& files = *listed;
  // Every file is read before any runs: an unreadable one never leaves a partial replay.
  std::vector<std::vector<uint8_t>> inputs;
  for (const std::string& file : files) {
    absl::StatusOr<std::vector<uint8_t>> read = ReadCaseFile(file);
    if (!read.ok()) {
      fmt::print(stderr, "repro: --sequence: {}\n", std::string(read.status().message()));
      return kExitBadInput;
    }
    inputs.push_back(*std::move(read));
  }
  std::vector<TargetFinding> calibration;
  absl::StatusOr<fuzz::LoadedModules> loaded = LoadSelectedModules(calibration);
  if (!loaded.ok()) {
    fmt::print(stderr, "repro: {}\n", loaded.status().ToString());
    return kExitBadInput;
  }
  fmt::print(text, "sequence {}: {} cases, replayed in name order in one process\n{}", dir, files.size(),
             loaded->report);
  SequenceReplay replay{fuzz::GemmDifferential(std::move(loaded->modules), DeviceOracleOrNone()), nullptr};
  nlohmann::json cases = nlohmann::json::array();
  size_t with_findings = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    cases.push_back(ReplaySequenceCase(std::filesystem::path(files[i]).filename().string(), inputs[i], replay));
    with_findings += cases.back()["findings"].empty() ? 0 : 1;
  }
  for (const TargetFinding& f : calibration) fmt::print(text, "FINDING {}: {}\n", f.finding.signature, f.finding.description);
  const bool any = with_findings > 0 || !calibration.empty();
  fmt::print(text, "\n{} of {} cases gave a finding{}\n", with_findings, files.size(),
             calibration.empty() ? "" : " (and the device matches no step model)");
  const int status = any ? kExitReproduced : kExitClean;
  if (absl::GetFlag(FLAGS_json)) {
    nlohmann::json verdict = {{"sequence", dir}, {"exit_status", status}, {"reproduced", any}, {"cases", cases}};
    fmt::print("{}\n", cli::DumpJson(verdict, 2));
  }
  return status;
}
}  // namespace
}  // namespace mxdiff::repro

static int Main(int argc, char** argv) {
  static constexpr std::string_view kFlags[] = {"emit",   "regressions", "external", "show",
                                                "modules", "disable_modules", "json", "minimize",
                                                "minimize_evaluations", "sequence"};
  constexpr const char* kUsage =
      "usage: repro FILE [--emit] [--external=LIB.so] [--modules=A,B] [--disable-modules=A,B] [--json]\n"
      "             [--minimize] [--minimize-evaluations=N] [--regressions=DIR] [--show=N]\n"
      "       repro --sequence DIR [--external=LIB.so] [--modules=A,B] [--disable-modules=A,B] [--json]\n";
  const absl::StatusOr<mxdiff::cli::CommandLine> line = mxdiff::cli::SplitCommandLine(argc, argv);
  if (line.ok() && line->help) {
    fmt::print("{}replays a fuzz case (a finding) and explains it (tools/repro/README.md).\n"
               "Exit status: 0 reproduced clean, 1 a mismatch or other finding reproduced, 2 bad input.\n\n"
               "flags:\n{}",
               kUsage, mxdiff::cli::FlagsHelp(kFlags));
    return 0;
  }
  absl::Status status = line.ok() ? mxdiff::cli::ApplyFlags(*line, kFlags, "repro") : line.status();
  const bool sequence = status.ok() && !absl::GetFlag(FLAGS_sequence).empty();
  if (status.ok() && sequence && !line->positional.empty()) {
    status = absl::InvalidArgumentError("either a case FILE or --sequence DIR, not both");
  } else if (status.ok() && !sequence && line->positional.size() != 1) {
    status = absl::InvalidArgumentError(line->positional.empty() ? "no case file given"
                                                                 : "one case file at a time");
  }
  if (!status.ok()) {
    // One line (the contract of tools/README.md); --help prints the usage.
    fmt::print(stderr, "repro: {} (repro --help lists the flags)\n", std::string(status.message()));
    return mxdiff::repro::kExitBadInput;
  }
  if (sequence) return mxdiff::repro::RunSequence(absl::GetFlag(FLAGS_sequence));
  return mxdiff::repro::Run(line->positional.front());
}

// Every exit goes through the check of stdout's writes (tools/cli/checked_output.h).
int main(int argc, char** argv) {
  return mxdiff::cli::RunWithCheckedOutput("repro", [&] { return Main(argc, argv); });
}
