// What every target's repro shares (fuzz/driver/fuzz_target.h, ReproParts): the defaults of a
// session, the session of a target without its own (describe, every check, every finding), --emit
// as a finding file, and the lookups repro makes in the registry.
#include <cstring>
#include <filesystem>

#include "absl/strings/str_join.h"
#include "fmt/format.h"
#include "fuzz/driver/findings.h"
#include "fuzz/driver/fuzz_target.h"

namespace mxdiff::fuzz {

absl::Status ReproSession::Minimize(const std::string& /*path*/, const TargetFinding& /*finding*/) {
  return absl::UnimplementedError("this target does not support --minimize");
}

void ReproSession::Conclude(const std::vector<TargetFinding>& findings) {
  const std::vector<std::string> declined = Declined();
  std::string verdict = fmt::format("{} finding(s) reproduced", findings.size());
  if (findings.empty() && declined.empty()) verdict = "reproduced clean";
  if (findings.empty() && !declined.empty()) {
    verdict = fmt::format("not checked: the module{} {} declined this case (MXDIFF_KERNEL_UNSUPPORTED or out of "
                          "memory): nothing of {} was compared, so the case is not clean (exit 3)",
                          declined.size() > 1 ? "s" : "", absl::StrJoin(declined, ", "),
                          declined.size() > 1 ? "theirs" : "its");
  }
  fmt::print(options_.text, "\n{}\n", verdict);
}

namespace {

class ChecksRepro : public ReproSession {
 public:
  ChecksRepro(const FuzzTarget& target, const ReproOptions& options) : ReproSession(options), target_(target) {}

  absl::StatusOr<std::vector<TargetFinding>> Explain(const std::string& path, std::span<const uint8_t> input) override {
    std::string described = target_.describe(input);
    if (!described.empty() && described.back() != '\n') described += '\n';
    fmt::print(options_.text, "{}\n{}", path, described);
    const std::vector<TargetFinding> found = Run(input, /*fresh=*/true);
    for (const TargetFinding& f : found) {
      fmt::print(options_.text, "{} FINDING {}\n  {}\n", f.target, f.finding.signature, f.finding.description);
    }
    if (found.empty()) fmt::print(options_.text, "{} ok\n", target_.name);
    return found;
  }

  std::vector<TargetFinding> Replay(std::span<const uint8_t> input) override { return Run(input, /*fresh=*/false); }

 private:
  // Every finding of every check of the target and of the other registered targets of its format.
  std::vector<TargetFinding> Run(std::span<const uint8_t> input, bool fresh) {
    std::vector<const FuzzTarget*> targets{&target_};
    for (const FuzzTarget* target : Registry()) {
      if (target->format == target_.format && target != &target_) targets.push_back(target);
    }
    std::vector<TargetFinding> found;
    for (const FuzzTarget* target : targets) {
      const InputFindings findings = target->check(input, fresh);
      for (const Finding& f : findings.value_or(std::vector<Finding>{})) found.push_back({std::string(target->name), f});
    }
    return found;
  }

  const FuzzTarget& target_;
};

}  // namespace

std::unique_ptr<ReproSession> OpenChecksRepro(const FuzzTarget& target, const ReproOptions& options) {
  return std::make_unique<ChecksRepro>(target, options);
}

absl::StatusOr<std::string> EmitAsFinding(const FuzzTarget& target, std::span<const uint8_t> input,
                                          const std::string& path, const TargetFinding* first,
                                          const std::string& regressions_dir) {
  const FuzzTarget* named = TargetOfFileName(std::filesystem::path(path).filename().string());
  const std::string name = first != nullptr ? first->target : std::string(named != nullptr ? named->name : target.name);
  const Finding finding = first != nullptr ? first->finding : Finding{"clean", ""};
  setenv("MXDIFF_FINDINGS_DIR", regressions_dir.c_str(), 1);
  absl::StatusOr<std::string> written = WriteFinding(name, input, finding);
  if (!written.ok()) return absl::Status(written.status().code(), written.status().ToString());
  // The regression folder holds cases only; the description is in the finding's own .txt.
  std::filesystem::remove(written->substr(0, written->size() - 5) + ".txt");
  return written;
}

const FuzzTarget& TargetOfInput(std::string_view file_name, std::span<const uint8_t> input) {
  for (const FuzzTarget* target : Registry()) {
    const std::string_view magic = target->magic;
    if (!magic.empty() && input.size() >= magic.size() && std::memcmp(input.data(), magic.data(), magic.size()) == 0) {
      return FormatHead(*target);
    }
  }
  const FuzzTarget* named = TargetOfFileName(file_name);
  return FormatHead(named != nullptr ? *named : *Registry().front());
}

const FuzzTarget& FormatHead(const FuzzTarget& target) {
  for (const FuzzTarget* registered : Registry()) {
    if (registered->format == target.format) return *registered;
  }
  return target;
}

std::string_view CasesName(const FuzzTarget& target) {
  return target.repro.cases.empty() ? target.format : target.repro.cases;
}

}  // namespace mxdiff::fuzz
