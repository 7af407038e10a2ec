// mxdiff audit PATH...: the checkpoint scale audit (checkpoint/README.md).
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/string_view.h"
#include "fmt/core.h"
#include "checkpoint/audit.h"
#include "tools/mxdiff/progress_bar.h"
#include "tools/mxdiff/commands.h"

namespace mxdiff::cli {

// --pattern given (even empty) or not: an empty regular expression selects nothing, so
// `--pattern=` is bad input, never the default selection (std::optional<std::string> would
// read "" as unset).
struct PatternFlag {
  std::optional<std::string> regex;
};
bool AbslParseFlag(absl::string_view text, PatternFlag* flag, std::string*) {
  flag->regex = std::string(text);
  return true;
}
std::string AbslUnparseFlag(const PatternFlag& flag) { return flag.regex.value_or(""); }

}  // namespace mxdiff::cli

ABSL_FLAG(std::string, format, "text", "audit: report format: text (a short summary) or json (checkpoint/README.md)");
ABSL_FLAG(bool, keep_going, false, "audit: after an error, audit the remaining files (the exit status is still 2)");
ABSL_FLAG(mxdiff::cli::PatternFlag, pattern, {},
          "audit: select the scale tensors by this regular expression over whole names instead of by dtype "
          "F8_E8M0 and the naming conventions");
ABSL_FLAG(int, threads, 0, "audit: threads reading scale bytes (0: one per CPU this process may use, at most one per 64 MiB of scale bytes)");
ABSL_FLAG(int, max_positions, 16, "audit: refused bytes whose positions are reported, per tensor and per layer");

namespace mxdiff::cli {

int AuditCommand(std::span<const std::string_view> args) {
  const std::string format = absl::GetFlag(FLAGS_format);
  if (format != "text" && format != "json") {
    fmt::print(stderr, "mxdiff audit: --format={}: use text or json\n", format);
    return kExitBadInput;
  }
  if (args.empty()) {
    fmt::print(stderr, "mxdiff audit: no checkpoint (usage: mxdiff audit [--format=json] PATH..., a PATH being a "
                       ".safetensors file, a folder or a *.safetensors.index.json)\n");
    return kExitBadInput;
  }
  const int threads = absl::GetFlag(FLAGS_threads);
  const int max_positions = absl::GetFlag(FLAGS_max_positions);
  if (threads < 0 || threads > 1024 || max_positions < 0 || max_positions > 1'000'000) {
    fmt::print(stderr, "mxdiff audit: --threads must be 0..1024 and --max_positions 0..1000000\n");
    return kExitBadInput;
  }
  const std::optional<std::string> pattern = absl::GetFlag(FLAGS_pattern).regex;
  if (pattern && pattern->empty()) {
    fmt::print(stderr, "mxdiff audit: --pattern is empty: give a regular expression over whole tensor names, or leave "
                       "the flag out for the default selection\n");
    return kExitBadInput;
  }
  checkpoint::AuditOptions options;
  options.keep_going = absl::GetFlag(FLAGS_keep_going);
  options.selection.pattern = pattern;
  options.scan.threads = threads;
  options.scan.max_positions = size_t(max_positions);
  const std::vector<std::string> paths(args.begin(), args.end());
  checkpoint::AuditResult result;
  {
    ProgressBar bar(stderr);
    if (bar.active()) options.scan.progress = [&bar](uint64_t done, uint64_t total) { bar.Update(done, total); };
    result = checkpoint::RunAudit(paths, options);
  }  // the bar's line is cleared before anything else is printed
  for (const checkpoint::AuditError& error : result.errors) fmt::print(stderr, "mxdiff audit: {}\n", error.message);
  if (const std::optional<checkpoint::NoKernelLayer> no_layer = checkpoint::FindNoKernelLayer(result)) {
    fmt::print(stderr, "mxdiff audit: {}\n", no_layer->message);
  }
  fmt::print("{}", format == "json" ? checkpoint::JsonReport(result) : checkpoint::TextReport(result));
  return checkpoint::ExitStatus(result);
}

}  // namespace mxdiff::cli
