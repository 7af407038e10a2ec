#include "fuzz/driver/findings.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "fuzz/mutators/mutation_sequence.h"
#include "reference/hash.h"

namespace mxdiff::fuzz {
namespace {

absl::Status WriteFile(const std::string& path, std::span<const uint8_t> bytes) {
  FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return absl::UnavailableError(fmt::format("cannot open {} for writing", path));
  const size_t written = std::fwrite(bytes.data(), 1, bytes.size(), file);
  const bool closed = std::fclose(file) == 0;
  if (written != bytes.size() || !closed) return absl::DataLossError(fmt::format("short write to {}", path));
  return absl::OkStatus();
}

}  // namespace

void InputHistory::Push(std::span<const uint8_t> input) {
  if (inputs_.size() == kInputs) {
    std::vector<uint8_t> oldest = std::move(inputs_.front());
    inputs_.pop_front();
    oldest.assign(input.begin(), input.end());  // its buffer reused
    inputs_.push_back(std::move(oldest));
    return;
  }
  inputs_.emplace_back(input.begin(), input.end());
}

Finding ConfirmInFreshState(const Finding& first, const std::function<CheckResult()>& again) {
  const CheckResult second = again();
  if (second && second->signature == first.signature) {
    return Finding{first.signature, first.description + "\n(found again when the input ran a second time, in a "
                                                        "fresh state)"};
  }
  return Finding{
      fmt::format("flaky/{}", first.signature),
      fmt::format("the first run found {}:\n  {}\nthe same input again, in a fresh state, {}", first.signature,
                  first.description,
                  second ? fmt::format("found {} instead:\n  {}", second->signature, second->description)
                         : std::string("found nothing: the first result did not reproduce (a race, a device or "
                                       "cache state the earlier inputs left; replay the sequence)"))};
}

static std::string& ReproFlagsOfThisProcess() {
  static std::string flags;
  return flags;
}

void SetReproFlags(std::string flags) { ReproFlagsOfThisProcess() = std::move(flags); }
const std::string& ReproFlags() { return ReproFlagsOfThisProcess(); }

std::string FindingsDirectory() {
  const char* dir = std::getenv("MXDIFF_FINDINGS_DIR");
  return dir != nullptr && *dir != '\0' ? dir : "mxdiff-findings";
}

std::string SignatureStem(std::string_view signature) {
  std::string stem;
  for (char c : signature) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                      c == '=' || c == '.';
    stem += safe ? c : '_';
  }
  return stem;
}

absl::StatusOr<std::string> WriteFinding(std::string_view target, std::span<const uint8_t> input,
                                         const Finding& finding, const InputHistory* history) {
  const std::string dir = FindingsDirectory();
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return absl::UnavailableError(fmt::format("cannot create {}: {}", dir, error.message()));
  const std::string base =
      fmt::format("{}/{}.{}.{:016x}", dir, target, SignatureStem(finding.signature), Fnv1a64(input));
  absl::Status status = WriteFile(base + ".case", input);
  if (!status.ok()) return status;
  std::string sequence;
  if (history != nullptr && !history->inputs().empty()) {
    const std::string folder = base + ".sequence";
    std::filesystem::create_directories(folder, error);
    if (error) return absl::UnavailableError(fmt::format("cannot create {}: {}", folder, error.message()));
    size_t index = 0;
    for (const std::vector<uint8_t>& earlier : history->inputs()) {
      status = WriteFile(fmt::format("{}/{:03}.case", folder, index++), earlier);
      if (!status.ok()) return status;
    }
    status = WriteFile(fmt::format("{}/{:03}.case", folder, index), input);
    if (!status.ok()) return status;
    sequence = fmt::format("sequence: {} ({} inputs this worker ran before it, then it)\n"
                           "repro-sequence: repro --sequence {}{}\n",
                           folder, index, folder, ReproFlags());
  }
  const std::string mutations = MutationSequenceOf(input);
  const std::string text =
      fmt::format("signature: {}\ntarget: {}\ninput: {}.case\nrepro: repro {}.case{}\n{}{}\n{}\n", finding.signature,
                  target, base, base, ReproFlags(), mutations.empty() ? "" : "mutations: " + mutations + "\n",
                  sequence, finding.description);
  status = WriteFile(base + ".txt", std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()),
                                                             text.size()));
  if (!status.ok()) return status;
  return base + ".case";
}

namespace {

const char* RunningInputPath() {
  const char* path = std::getenv("MXDIFF_RUNNING_INPUT");
  return path != nullptr && *path != '\0' ? path : nullptr;
}

}  // namespace

void MarkRunningInput(std::span<const uint8_t> input, std::string_view what) {
  const char* path = RunningInputPath();
  if (path == nullptr) return;
  const std::string text = fmt::format("{}\n", what);
  absl::Status status = WriteFile(std::string(path) + ".txt", std::span<const uint8_t>(
                                                                  reinterpret_cast<const uint8_t*>(text.data()), text.size()));
  if (status.ok()) status = WriteFile(path, input);
  static bool said = false;
  if (!status.ok() && !said) {
    said = true;
    fmt::print(stderr, "==mxdiff== MXDIFF_RUNNING_INPUT: {} (a crash now is reported without its input)\n",
               std::string(status.message()));
  }
}

void ClearRunningInput() {
  const char* path = RunningInputPath();
  if (path == nullptr) return;
  std::error_code ignored;  // nothing there is fine: nothing was left to report
  std::filesystem::remove(path, ignored);
  std::filesystem::remove(std::string(path) + ".txt", ignored);
}

bool KeepGoing() {
  static const bool keep_going = [] {
    const char* value = std::getenv("MXDIFF_KEEP_GOING");
    return value != nullptr && std::string_view(value) == "1";
  }();
  return keep_going;
}

namespace {

// Keep-going's record of this process: per signature of a check, how it was reported (the same,
// or flaky/<signature>) and how many inputs found it.
class KeptFindings {
 public:
  static constexpr size_t kWritten = 100;

  void Record(std::string_view target, std::span<const uint8_t> input, const Finding& finding,
              const std::function<CheckResult()>& again, const InputHistory* history) {
    for (Kept& kept : kept_) {
      if (kept.signature == finding.signature) {
        if ((++kept.inputs & (kept.inputs - 1)) == 0) fmt::print(stderr, "{}", CountLine(kept));
        return;
      }
    }
    const Finding confirmed = ConfirmInFreshState(finding, again);
    kept_.push_back(Kept{finding.signature, confirmed.signature, 1});
    if (written_ == kWritten) {
      fmt::print(stderr, "==mxdiff== kept going: {} signatures written; {} and later ones are counted only\n",
                 kWritten, confirmed.signature);
      return;
    }
    ++written_;
    absl::StatusOr<std::string> path = WriteFinding(target, input, confirmed, history);
    fmt::print(stderr, "==mxdiff== kept going past {}\n==mxdiff== saved: {}\n", confirmed.signature,
               path.ok() ? *path : std::string(path.status().message()));
  }

  std::string Summary() const {
    std::string text;
    for (const Kept& kept : kept_) text += CountLine(kept);
    return text;
  }

 private:
  struct Kept {
    std::string signature;
    std::string reported;
    int64_t inputs = 0;
  };
  static std::string CountLine(const Kept& kept) {
    return fmt::format("==mxdiff== kept going: {} input(s) found {}\n", kept.inputs, kept.reported);
  }
  std::vector<Kept> kept_;
  size_t written_ = 0;
};

}  // namespace

void ReportFinding(std::string_view target, std::span<const uint8_t> input, const Finding& finding,
                   const std::function<CheckResult()>& again, const InputHistory* history) {
  if (!KeepGoing()) ReportFindingAndAbort(target, input, ConfirmInFreshState(finding, again), history);
  static KeptFindings* kept = [] {
    static KeptFindings findings;
    std::atexit([] { std::fputs(findings.Summary().c_str(), stderr); });
    return &findings;
  }();
  kept->Record(target, input, finding, again, history);
}

void ReportFindingAndAbort(std::string_view target, std::span<const uint8_t> input, const Finding& finding,
                           const InputHistory* history) {
  absl::StatusOr<std::string> path = WriteFinding(target, input, finding, history);
  fmt::print(stderr, "\n==mxdiff== FINDING {}\n==mxdiff== target: {}\n==mxdiff== saved: {}\n{}\n",
             finding.signature, target, path.ok() ? *path : std::string(path.status().message()),
             finding.description);
  std::fflush(stderr);
  std::abort();
}

}  // namespace mxdiff::fuzz
