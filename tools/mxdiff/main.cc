// mxdiff COMMAND [--flags] [ARGS]. A command is one kCommands entry: its name, a summary, the
// ABSL_FLAGs it takes (defined in its *_command.cc) and its function. The command line is parsed
// strictly (tools/cli/command_line.h): a flag of another command, an unknown flag or a bad value
// is bad input (exit 2); `mxdiff --help` lists the commands, `mxdiff COMMAND --help` the
// command's flags (exit 0).
#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "fmt/core.h"
#include "tools/cli/checked_output.h"
#include "tools/cli/command_line.h"
#include "tools/mxdiff/commands.h"

namespace {

struct Command {
  std::string_view name;
  std::string_view summary;
  std::vector<std::string_view> flags;  // the ABSL_FLAGs this command takes, by name
  int (*run)(std::span<const std::string_view>);
  // Its own help for flags another command defines, and its exit statuses where they differ
  // from Usage()'s (both for --help).
  std::span<const mxdiff::cli::OwnFlagHelp> (*own_help)() = nullptr;
  std::string_view exit_statuses = "";
};

const Command kCommands[] = {
    {"vectors", "check hardware-recorded vectors: --model=NAME FILE...", {"model", "max_failures"},
     mxdiff::cli::VectorsCommand},
    {"transform-table", "print both transforms for all 16 codes x 256 scale bytes as CSV", {},
     mxdiff::cli::TransformTableCommand},
    {"self-check", "transform, admission and model self-checks of the reference", {"quiet"},
     mxdiff::cli::SelfCheckCommand},
    {"calibrate", "on a GPU: find which step model this device and build match",
     {"expect", "write", "seed", "warps", "steps"}, mxdiff::cli::CalibrateCommand},
    {"bench", "on a GPU: A/B timing of two arms (default ordinary vs folded) with controls",
     {"arms", "shapes", "experts", "rows", "tactic", "tune", "naive", "first_use", "first_use_fallback", "target_pct", "budget_s", "min_effect_us", "min_rounds",
      "max_rounds", "bootstrap", "bench_seed", "sets_mb", "calls", "l2_flush", "warmup", "json", "csv", "ext_model",
      "device"},
     mxdiff::cli::BenchCommand},
    {"audit", "audit a checkpoint's MXFP4 scale bytes per kernel layer against the fold admission rule: PATH...",
     {"format", "keep_going", "pattern", "threads", "max_positions"}, mxdiff::cli::AuditCommand},
    {"gate", "the merge verdict for the folded kernel on a checkpoint: audit, proof, real weights, exactness, speed",
     {"layers", "tp", "rank", "arms", "cases", "fuzz_time", "report", "seed", "budget_s", "speed_time", "baseline_kernel",
      "candidate_kernel", "ext_model"}, mxdiff::cli::GateCommand,
     mxdiff::cli::GateOwnFlagHelp, mxdiff::cli::kGateExitStatuses},
};

std::string Usage() {
  std::string usage = "usage: mxdiff COMMAND [--flags] [ARGS]\n\ncommands:\n";
  for (const Command& command : kCommands) usage += fmt::format("  {:<16} {}\n", command.name, command.summary);
  usage += "\n`mxdiff COMMAND --help` lists the command's flags.\n"
           "Exit status: 0 success, 1 a check failed, 2 bad input (gate: 3 inconclusive).\n";
  return usage;
}

std::string CommandHelp(const Command& command) {
  std::string help = fmt::format("usage: mxdiff {} [--flags] [ARGS]\n{}\n", command.name, command.summary);
  const std::span<const mxdiff::cli::OwnFlagHelp> own =
      command.own_help != nullptr ? command.own_help() : std::span<const mxdiff::cli::OwnFlagHelp>();
  help += command.flags.empty()
              ? "\nflags: none\n"
              : "\nflags:\n" + mxdiff::cli::FlagsHelp(command.flags, fmt::format("{}: ", command.name), own);
  if (!command.exit_statuses.empty()) help += fmt::format("\n{}", command.exit_statuses);
  return help;
}

std::string Owners(std::string_view flag) {
  std::string owners;
  for (const Command& command : kCommands) {
    if (std::find(command.flags.begin(), command.flags.end(), flag) != command.flags.end()) {
      owners += fmt::format("{}{}", owners.empty() ? "" : ", ", command.name);
    }
  }
  return owners;
}

// The table against the binary's flags: every listed flag exists, and every flag defined in
// tools/mxdiff/ is listed by some command (a new command's entry cannot forget its flags).
std::string TableProblems() {
  std::string problems;
  for (const Command& command : kCommands) {
    for (const std::string& missing : mxdiff::cli::UndefinedFlags(command.flags)) {
      problems += fmt::format("command {} lists --{}, which no ABSL_FLAG defines\n", command.name, missing);
    }
  }
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (flag->Filename().find("tools/mxdiff/") == std::string::npos) continue;
    const std::string flag_name(name.data(), name.size());
    if (Owners(flag_name).empty()) {
      problems += fmt::format("--{} ({}) is in no command's flag list in main.cc\n", flag_name, flag->Filename());
    }
  }
  return problems;
}

}  // namespace

static int Main(int argc, char** argv) {
  using mxdiff::cli::kExitBadInput;
  if (const std::string problems = TableProblems(); !problems.empty()) {
    fmt::print(stderr, "mxdiff: internal error in the command table:\n{}", problems);
    return kExitBadInput;
  }
  const absl::StatusOr<mxdiff::cli::CommandLine> line = mxdiff::cli::SplitCommandLine(argc, argv);
  if (!line.ok()) {
    std::string hint = "`mxdiff --help` lists the commands, `mxdiff COMMAND --help` their flags";
    for (int i = 1; i < argc; ++i) {
      for (const Command& command : kCommands) {
        if (command.name == argv[i]) hint = fmt::format("`mxdiff {} --help` lists its flags", command.name);
      }
    }
    fmt::print(stderr, "mxdiff: {} ({})\n", std::string(line.status().message()), hint);
    return kExitBadInput;
  }
  if (line->positional.empty()) {
    fmt::print(line->help ? stdout : stderr, "{}", Usage());
    return line->help ? mxdiff::cli::kExitOk : kExitBadInput;
  }
  const std::string& name = line->positional.front();
  const Command* command = nullptr;
  for (const Command& candidate : kCommands) {
    if (candidate.name == name) command = &candidate;
  }
  if (command == nullptr) {
    fmt::print(stderr, "mxdiff: unknown command '{}' (`mxdiff --help` lists the commands)\n", name);
    return kExitBadInput;
  }
  if (line->help) {
    fmt::print("{}", CommandHelp(*command));
    return mxdiff::cli::kExitOk;
  }
  for (const auto& [flag, value] : line->flags) {
    if (std::find(command->flags.begin(), command->flags.end(), flag) != command->flags.end()) continue;
    const std::string owners = Owners(flag);
    fmt::print(stderr, "mxdiff {}: --{} is not a flag of {}{}; `mxdiff {} --help` lists its flags\n", command->name,
               flag, command->name, owners.empty() ? "" : fmt::format(" (it belongs to: {})", owners), command->name);
    return kExitBadInput;
  }
  if (absl::Status status = mxdiff::cli::ApplyFlags(*line, command->flags, fmt::format("mxdiff {}", command->name));
      !status.ok()) {
    fmt::print(stderr, "mxdiff {}: {}\n", command->name, std::string(status.message()));
    return kExitBadInput;
  }
  const std::vector<std::string_view> args(line->positional.begin() + 1, line->positional.end());
  return command->run(args);
}

// Every exit goes through the check of stdout's writes (tools/cli/checked_output.h).
int main(int argc, char** argv) {
  return mxdiff::cli::RunWithCheckedOutput("mxdiff", [&] { return Main(argc, argv); });
}
