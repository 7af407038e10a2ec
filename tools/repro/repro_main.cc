// repro FILE: replays one fuzz case (typically a finding) and explains it, through the target its
// file belongs to (fuzz/driver/fuzz_target.h: the codec's magic, else the file name, else the first
// registered target) and that target's ReproParts: GEMM cases get the CPU targets of the case format,
// the route and fuzz_gemm's checks on every kernel module with the mismatches explained
// (fuzz/targets/case_repro.cc); fuzz_layer cases the layer check (fuzz/targets/fuzz_layer.cc); any
// other target its checks. repro names no target: a new one needs no edit here.
// Exit status: 0 reproduced clean, 1 a mismatch or other finding reproduced, 2 bad input, 3 not
// checked: a kernel module declined the case (MXDIFF_KERNEL_UNSUPPORTED) and nothing else was found.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/marshalling.h"
#include "absl/strings/ascii.h"
#include "nlohmann/json.hpp"
#include "fmt/format.h"
#include "fuzz/driver/findings.h"
#include "fuzz/driver/fuzz_target.h"
#include "reference/exit_status.h"
#include "tools/cli/checked_output.h"
#include "tools/cli/command_line.h"
#include "checkpoint/json_bytes.h"
#include "tools/cli/input_file.h"

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

using fuzz::TargetFinding;


// Human text: stdout, or stderr with --json (stdout then holds the verdict alone).
std::FILE* text = stdout;

// The largest input any registered target's codec decodes (FuzzTarget::max_size).
size_t MaxInputSize() {
  size_t largest = 0;
  for (const fuzz::FuzzTarget* target : fuzz::Registry()) {
    largest = std::max(largest, target->max_size != 0 ? target->max_size : target->options.max_len);
  }
  return largest;
}

// At most MaxInputSize() + 1 bytes are read, so /dev/zero or a huge file is rejected at once.
absl::StatusOr<std::vector<uint8_t>> ReadCaseFile(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    return absl::InvalidArgumentError(fmt::format("{} is a directory, not a case file", path));
  }
  if (absl::Status refused = cli::RefuseStreamInput(path); !refused.ok()) return refused;  // a FIFO would hang
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  const size_t limit = MaxInputSize();
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

// Why `flag` cannot run on `target`'s cases ("--minimize works on GEMM cases; F is a fuzz_layer
// case"), empty when it can.
std::string UnsupportedFlag(const fuzz::FuzzTarget& target, const std::string& path) {
  const bool minimize = absl::GetFlag(FLAGS_minimize) && !target.repro.minimize;
  if (!minimize && !(absl::GetFlag(FLAGS_json) && !target.repro.json)) return "";
  std::string formats;
  for (const fuzz::FuzzTarget* other : fuzz::Registry()) {
    if (&fuzz::FormatHead(*other) != other || !(minimize ? other->repro.minimize : other->repro.json)) continue;
    formats += fmt::format("{}{}", formats.empty() ? "" : ", ", fuzz::CasesName(*other));
  }
  return fmt::format("--{} works on {} cases; {} is a {} case", minimize ? "minimize" : "json",
                     formats.empty() ? "no" : formats, path, target.name);
}

fuzz::ReproOptions OptionsFromFlags() {
  return fuzz::ReproOptions{.text = text,
                            .show = absl::GetFlag(FLAGS_show),
                            .modules = absl::GetFlag(FLAGS_modules),
                            .disable_modules = absl::GetFlag(FLAGS_disable_modules),
                            .external = absl::GetFlag(FLAGS_external),
                            .minimize_evaluations = absl::GetFlag(FLAGS_minimize_evaluations)};
}

// repro --json: tools/repro/README.md documents the fields.
void PrintJsonVerdict(const std::string& path, const std::vector<fuzz::ReproCheckVerdict>& checks,
                      const std::vector<fuzz::ReproRanPlan>& plans, const std::vector<TargetFinding>& findings,
                      const std::vector<std::string>& declined, int status) {
  nlohmann::json verdict = {{"file", path}, {"exit_status", status}, {"reproduced", !findings.empty()},
                            {"mutations", SidecarMutations(path)}, {"declined", declined}};
  verdict["findings"] = nlohmann::json::array();
  for (const TargetFinding& f : findings) {
    verdict["findings"].push_back({{"target", f.target}, {"check", f.check}, {"module", f.module},
                                   {"signature", f.finding.signature}, {"description", f.finding.description}});
  }
  verdict["checks"] = nlohmann::json::array();
  for (const fuzz::ReproCheckVerdict& v : checks) {
    verdict["checks"].push_back({{"check", v.check}, {"module", v.module}, {"passed", v.passed}, {"signature", v.signature}});
  }
  verdict["plans"] = nlohmann::json::array();
  for (const fuzz::ReproRanPlan& p : plans) {
    verdict["plans"].push_back({{"module", p.module}, {"cta_k", p.cta_k}, {"splits", p.splits}, {"kernel", p.kernel},
                                {"requested_cta_k", p.requested_cta_k}, {"requested_splits", p.requested_splits}});
  }
  fmt::print("{}\n", cli::DumpJson(verdict, 2));
}

// --minimize: the target's session shrinks the case; false when it failed (exit 2).
bool MinimizeCase(fuzz::ReproSession& session, const std::string& path, const std::vector<TargetFinding>& findings) {
  if (findings.empty()) {
    fmt::print(text, "\n--minimize: nothing to minimize (no finding reproduced); no {}.min written\n", path);
    return true;
  }
  if (absl::Status status = session.Minimize(path, findings.front()); !status.ok()) {
    fmt::print(stderr, "repro: --minimize: {}\n", status.ToString());
    return false;
  }
  return true;
}

// --emit: where the target keeps its regressions; false when it failed (exit 2).
bool Emit(const fuzz::FuzzTarget& target, const std::string& path, std::span<const uint8_t> bytes,
          const std::vector<TargetFinding>& findings) {
  const absl::StatusOr<std::string> written =
      target.repro.emit(target, bytes, path, findings.empty() ? nullptr : &findings.front(), absl::GetFlag(FLAGS_regressions));
  if (!written.ok()) {
    fmt::print(stderr, "repro: --emit failed: {}\n", std::string(written.status().message()));
    return false;
  }
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
  const fuzz::FuzzTarget& target = fuzz::TargetOfInput(std::filesystem::path(path).filename().string(), bytes);
  if (const std::string refused = UnsupportedFlag(target, path); !refused.empty()) {  // not a silent no-op
    fmt::print(stderr, "repro: {}\n", refused);
    return kExitBadInput;
  }
  if (absl::Status decoded = target.decode(bytes); !decoded.ok()) {
    fmt::print(stderr, "repro: {} is {}\n", path, std::string(decoded.message()));
    return kExitBadInput;
  }
  const std::unique_ptr<fuzz::ReproSession> session = target.repro.open(target, OptionsFromFlags());
  const absl::StatusOr<std::vector<TargetFinding>> explained = session->Explain(path, bytes);
  if (!explained.ok()) {
    fmt::print(stderr, "repro: {}\n", std::string(explained.status().message()));
    return kExitBadInput;
  }
  const std::vector<TargetFinding>& findings = *explained;
  if (absl::GetFlag(FLAGS_minimize) && !MinimizeCase(*session, path, findings)) return kExitBadInput;
  if (absl::GetFlag(FLAGS_emit) && !Emit(target, path, bytes, findings)) return kExitBadInput;
  session->Conclude(findings);
  // A module that declined the case compared nothing: not clean, and not a finding either.
  const int status = !findings.empty()               ? kExitCheckFailed
                     : !session->Declined().empty() ? kExitInconclusive
                                                    : kExitOk;
  if (absl::GetFlag(FLAGS_json)) {
    PrintJsonVerdict(path, session->CheckVerdicts(), session->RanPlans(), findings, session->Declined(), status);
  }
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

// One session per format, in registry order, each readied for a sequence; the text that heads the replay.
absl::StatusOr<std::string> StartSessions(std::map<std::string_view, std::unique_ptr<fuzz::ReproSession>>& sessions) {
  std::string heading;
  for (const fuzz::FuzzTarget* target : fuzz::Registry()) {
    if (&fuzz::FormatHead(*target) != target) continue;
    std::unique_ptr<fuzz::ReproSession>& session = sessions[target->format];
    session = target->repro.open(*target, OptionsFromFlags());
    const absl::StatusOr<std::string> started = session->StartSequence();
    if (!started.ok()) return started.status();
    heading += *started;
  }
  return heading;
}

// One case of a sequence: its line of text and its JSON entry. A case its codec refuses is skipped,
// as the fuzz target skips it.
nlohmann::json ReplaySequenceCase(const std::string& name, std::span<const uint8_t> input,
                                  std::map<std::string_view, std::unique_ptr<fuzz::ReproSession>>& sessions) {
  const fuzz::FuzzTarget& target = fuzz::TargetOfInput(name, input);
  const bool valid = target.decode(input).ok();
  const std::vector<TargetFinding> found = valid ? sessions.at(target.format)->Replay(input) : std::vector<TargetFinding>{};
  nlohmann::json entry = {{"file", name}, {"kind", absl::AsciiStrToLower(std::string(fuzz::CasesName(target)))}, {"valid", valid},
                          {"findings", nlohmann::json::array()}};
  if (!valid) {
    fmt::print(text, "{}: not a valid case (skipped, as the fuzz target skips it)\n", name);
  } else if (found.empty()) {
    fmt::print(text, "{}: ok\n", name);
  }
  for (const TargetFinding& f : found) {
    fmt::print(text, "{}: FINDING {} ({}{})\n  {}\n", name, f.finding.signature, f.target,
               f.module.empty() ? "" : ", module " + f.module, f.finding.description);
    entry["findings"].push_back({{"target", f.target}, {"check", f.check}, {"module", f.module},
                                 {"signature", f.finding.signature}});
  }
  return entry;
}

// repro --sequence DIR: the *.case files of DIR in name order, in this one process: one session per
// format (the same modules, loaded once, and the same device state throughout, as the worker ran
// them). Each case gets what `repro FILE` checks. A file that does not decode is skipped, as the
// fuzz target skips it. Exit 1 if any case gave a finding.
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
  std::map<std::string_view, std::unique_ptr<fuzz::ReproSession>> sessions;
  const absl::StatusOr<std::string> heading = StartSessions(sessions);
  if (!heading.ok()) {
    fmt::print(stderr, "repro: {}\n", std::string(heading.status().message()));
    return kExitBadInput;
  }
  fmt::print(text, "sequence {}: {} cases, replayed in name order in one process\n{}", dir, files.size(), *heading);
  nlohmann::json cases = nlohmann::json::array();
  size_t with_findings = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    cases.push_back(ReplaySequenceCase(std::filesystem::path(files[i]).filename().string(), inputs[i], sessions));
    with_findings += int(!cases.back()["findings"].empty());
  }
  std::string notes;
  bool session_findings = false;
  for (const auto& [format, session] : sessions) {
    for (const TargetFinding& f : session->SessionFindings()) {
      fmt::print(text, "FINDING {}: {}\n", f.finding.signature, f.finding.description);
      session_findings = true;
    }
    notes += session->SessionNote();
  }
  const bool any = with_findings > 0 || session_findings;
  fmt::print(text, "\n{} of {} cases gave a finding{}\n", with_findings, files.size(), notes);
  const int status = any ? kExitCheckFailed : kExitOk;
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
               "Exit status: 0 reproduced clean, 1 a mismatch or other finding reproduced, 2 bad input,\n"
               "3 not checked (a kernel module declined the case).\n\n"
               "flags:\n{}",
               kUsage, mxdiff::cli::FlagsHelp(kFlags));
    return mxdiff::kExitOk;
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
    return mxdiff::kExitBadInput;
  }
  if (sequence) return mxdiff::repro::RunSequence(absl::GetFlag(FLAGS_sequence));
  return mxdiff::repro::Run(line->positional.front());
}

// Every exit goes through the check of stdout's writes (tools/cli/checked_output.h).
int main(int argc, char** argv) {
  return mxdiff::cli::RunWithCheckedOutput("repro", [&] { return Main(argc, argv); });
}
