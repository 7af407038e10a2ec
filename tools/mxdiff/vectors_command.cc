// mxdiff vectors --model=NAME FILE...: replays hardware-recorded step chains through a model.
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "fmt/core.h"
#include "reference/step_model.h"
#include "reference/vector_file.h"
#include "tools/cli/input_file.h"
#include "tools/mxdiff/commands.h"

ABSL_FLAG(std::string, model, "", "vectors: step model: v100, sm90-emulated, sm90-emulated-ftz or exact");
ABSL_FLAG(int, max_failures, 5, "vectors: failures printed per file");

namespace mxdiff::cli {

int VectorsCommand(std::span<const std::string_view> args) {
  const std::string model_name = absl::GetFlag(FLAGS_model);
  const std::optional<StepModel> model = ParseStepModel(model_name);
  if (!model) {
    fmt::print(
        stderr,
        "mxdiff vectors: unknown model '{}' (use --model=v100, sm90-emulated, sm90-emulated-ftz or exact)\n",
        model_name);
    return kExitBadInput;
  }
  if (args.empty()) {
    fmt::print(stderr, "mxdiff vectors: no files (usage: mxdiff vectors --model=NAME FILE...)\n");
    return kExitBadInput;
  }
  const int max_failures = absl::GetFlag(FLAGS_max_failures);
  if (max_failures < 0) {
    fmt::print(stderr, "mxdiff vectors: --max_failures must be >= 0\n");
    return kExitBadInput;
  }
  // Every file is parsed before any is judged: bad input never yields a partial verdict.
  std::vector<VectorFile> files;
  for (std::string_view path : args) {
    if (absl::Status refused = RefuseStreamInput(std::string(path)); !refused.ok()) {
      fmt::print(stderr, "mxdiff vectors: {}\n", std::string(refused.message()));
      return kExitBadInput;
    }
    absl::StatusOr<VectorFile> file = ReadVectorFile(std::string(path));
    if (!file.ok()) {
      fmt::print(stderr, "mxdiff vectors: {}\n", std::string(file.status().message()));
      return kExitBadInput;
    }
    files.push_back(*std::move(file));
  }
  size_t passed = 0, failed = 0;
  for (const VectorFile& file : files) {
    size_t file_failed = 0;
    std::string failures;
    for (const VectorRow& row : file.rows) {
      const uint32_t got = EvaluateVectorRow(*model, row);
      if (VectorResultMatches(row.d, got)) continue;
      if (int(file_failed++) < max_failures) {
        failures += fmt::format("  {}:{}: device {:08x}, model {:08x}; row {}\n", file.name, row.line, row.d,
                                got, FormatVectorRow(row));
      }
    }
    fmt::print("{}: model {}, K {}, {} rows: {} passed, {} failed\n{}", file.name, model_name, file.k,
               file.rows.size(), file.rows.size() - file_failed, file_failed, failures);
    passed += file.rows.size() - file_failed;
    failed += file_failed;
  }
  fmt::print("{} passed, {} failed\n", passed, failed);
  return failed == 0 ? kExitOk : kExitCheckFailed;
}

}  // namespace mxdiff::cli
