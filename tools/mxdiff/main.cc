#include <cstdio>
#include <string_view>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "fmt/core.h"
#include "tools/mxdiff/commands.h"

namespace {

struct Command {
  std::string_view name;
  std::string_view summary;
  int (*run)(std::span<const std::string_view>);
};

constexpr Command kCommands[] = {
    {"vectors", "check hardware-recorded vectors: --model=NAME FILE...", mxdiff::cli::VectorsCommand},
    {"transform-table", "print both transforms for all 16 codes x 256 scale bytes as CSV",
     mxdiff::cli::TransformTableCommand},
    {"self-check", "transform, admission and model self-checks of the reference",
     mxdiff::cli::SelfCheckCommand},
    {"calibrate", "on a GPU: find which step model this device and build match",
     mxdiff::cli::CalibrateCommand},
};

std::string Usage() {
  std::string usage = "usage: mxdiff COMMAND [--flags] [ARGS]\n\ncommands:\n";
  for (const Command& command : kCommands) {
    usage += fmt::format("  {:<16} {}\n", command.name, command.summary);
  }
  return usage;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(Usage());
  const std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() < 2) {
    fmt::print(stderr, "{}", Usage());
    return mxdiff::cli::kExitBadInput;
  }
  const std::string_view name = positional[1];
  const std::vector<std::string_view> args(positional.begin() + 2, positional.end());
  for (const Command& command : kCommands) {
    if (command.name == name) return command.run(args);
  }
  fmt::print(stderr, "mxdiff: unknown command '{}'\n\n{}", name, Usage());
  return mxdiff::cli::kExitBadInput;
}
