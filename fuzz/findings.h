// Findings: a stable signature (the dedup key, e.g. `mismatch/folded/16x128x32/s5/a=0`) and a
// readable description. The writer puts the input and the description on disk before anything
// aborts, so a campaign never loses a finding to the crash that reports it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace mxdiff::fuzz {

struct Finding {
  std::string signature;    // stable across runs: no addresses, no values that vary per input
  std::string description;  // what differed, with the numbers
};

using CheckResult = std::optional<Finding>;

// Directory from MXDIFF_FINDINGS_DIR, else "mxdiff-findings" in the working directory.
std::string FindingsDirectory();

// "mismatch/folded/16x128x32/s5/a=0" -> "mismatch_folded_16x128x32_s5_a=0" (file-name safe).
std::string SignatureStem(std::string_view signature);

// Writes <dir>/<target>.<stem>.<fnv64 of input>.case and the matching .txt (signature,
// description, repro command). Returns the .case path.
absl::StatusOr<std::string> WriteFinding(std::string_view target, std::span<const uint8_t> input,
                                         const Finding& finding);

// Writes the finding, prints it to stderr, then aborts (libFuzzer saves its crash artifact).
[[noreturn]] void ReportFindingAndAbort(std::string_view target, std::span<const uint8_t> input,
                                        const Finding& finding);

}  // namespace mxdiff::fuzz
