// Findings: a stable signature (the dedup key, e.g. `mismatch/folded/16x128x32/s5/a=0`) and a
// readable description. The writer puts the input and the description on disk before anything
// aborts, so a campaign never loses a finding to the crash that reports it.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace mxdiff::fuzz {

struct Finding {
  std::string signature;    // stable across runs: no addresses, no values that vary per input
  std::string description;  // what differed, with the numbers
};

using CheckResult = std::optional<Finding>;

// The inputs a worker ran last, oldest first, so that a finding that needs what ran before it (a
// device state, a cache) can be replayed in order: `repro --sequence DIR`, or the target over
// DIR's files (libFuzzer and the replay binaries run named files in order).
class InputHistory {
 public:
  static constexpr size_t kInputs = 32;
  void Push(std::span<const uint8_t> input);
  const std::deque<std::vector<uint8_t>>& inputs() const { return inputs_; }

 private:
  std::deque<std::vector<uint8_t>> inputs_;
};

// A finding confirmed by running its input again in a fresh state (`again`: no cached decode,
// device layer or reference). The same signature again: the finding, saying so. Otherwise
// flaky/<signature>, with both results: a result is only worth the bits under it.
Finding ConfirmInFreshState(const Finding& first, const std::function<CheckResult()>& again);

// The flags repro needs, beyond the file, to replay this process's findings (" --external=LIB" where
// fuzz_gemm loaded an external kernel): written after both repro commands of a finding's .txt.
void SetReproFlags(std::string flags);
const std::string& ReproFlags();

// Directory from MXDIFF_FINDINGS_DIR, else "mxdiff-findings" in the working directory.
std::string FindingsDirectory();

// "mismatch/folded/16x128x32/s5/a=0" -> "mismatch_folded_16x128x32_s5_a=0" (file-name safe).
std::string SignatureStem(std::string_view signature);

// Writes <dir>/<target>.<stem>.<fnv64 of input>.case and the matching .txt (signature,
// description, repro command, and `mutations:` the names of the mutations that produced the
// input where this process's last mutation did: fuzz/mutators/mutation_sequence.h) and, given a history, <...>.sequence/NNN.case: those inputs in the
// order they ran, ending with this one. Returns the .case path.
absl::StatusOr<std::string> WriteFinding(std::string_view target, std::span<const uint8_t> input,
                                         const Finding& finding, const InputHistory* history = nullptr);

// The input this process runs outside libFuzzer's loop (fuzz_gemm's known cases, run in
// LLVMFuzzerInitialize, where libFuzzer's crash handler is not yet installed and writes no input):
// written to the file MXDIFF_RUNNING_INPUT names (the campaign names one per worker) before it
// runs, with PATH.txt saying what it is, and removed by ClearRunningInput once the inputs ran. A
// crash leaves it there: the campaign reports it as the input that crashed. Without the variable
// nothing is written. A file that cannot be written is said once on stderr (the crash is still
// reported, without its input).
void MarkRunningInput(std::span<const uint8_t> input, std::string_view what);
void ClearRunningInput();

// MXDIFF_KEEP_GOING=1 (the campaign's --keep-going): a finding is written and the worker fuzzes on,
// so a kernel that deviates from the contract in one way is still searched for the others.
bool KeepGoing();

// A check's finding on `input`: confirmed in a fresh state (`again`: the check once more after the
// target forgot its state) and written with `history`, then the process aborts. With KeepGoing()
// it returns instead: the first input of each signature is confirmed and written (at most 100
// signatures; later ones are counted), the others only counted. "==mxdiff== kept going: N input(s)
// found SIGNATURE" is printed when N reaches 2, 4, 8, ... and for every signature at exit; the
// campaign adds the largest N of each worker up.
void ReportFinding(std::string_view target, std::span<const uint8_t> input, const Finding& finding,
                   const std::function<CheckResult()>& again, const InputHistory* history);

// Writes the finding, prints it to stderr, then aborts (libFuzzer saves its crash artifact).
[[noreturn]] void ReportFindingAndAbort(std::string_view target, std::span<const uint8_t> input,
                                        const Finding& finding, const InputHistory* history = nullptr);

}  // namespace mxdiff::fuzz
