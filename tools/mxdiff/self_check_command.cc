// mxdiff self-check: the reference's built-in checks (reference/self_check.h), one line each.
#include "absl/flags/flag.h"
#include "fmt/core.h"
#include "reference/self_check.h"
#include "tools/mxdiff/commands.h"

ABSL_FLAG(bool, quiet, false, "self-check: print only failures and the summary");

namespace mxdiff::cli {

int SelfCheckCommand(std::span<const std::string_view> args) {
  if (!args.empty()) {
    fmt::print(stderr, "mxdiff self-check: takes no arguments, got '{}'\n", args.front());
    return kExitBadInput;
  }
  const bool quiet = absl::GetFlag(FLAGS_quiet);
  size_t passed = 0, failed = 0;
  for (const SelfCheckResult& result : RunSelfChecks()) {
    (result.passed ? passed : failed)++;
    if (quiet && result.passed) continue;
    fmt::print("{} {}: {}\n", result.passed ? "PASS" : "FAIL", result.name, result.detail);
  }
  fmt::print("{} passed, {} failed\n", passed, failed);
  return failed == 0 ? kExitOk : kExitCheckFailed;
}

}  // namespace mxdiff::cli
