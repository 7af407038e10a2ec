#include "tools/cli/command_line.h"

#include <algorithm>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "fmt/format.h"

namespace mxdiff::cli {
namespace {

bool IsHelpName(std::string_view name) {
  return name == "help" || name == "helpfull" || name == "helpshort" || name == "helppackage" || name == "helpon" ||
         name == "helpmatch" || name == "h" || name == "?";
}

absl::CommandLineFlag* Find(std::string_view name) {
  return absl::FindCommandLineFlag(absl::string_view(name.data(), name.size()));
}

std::string ToString(absl::string_view text) { return std::string(text.data(), text.size()); }

}  // namespace

absl::StatusOr<CommandLine> SplitCommandLine(int argc, char** argv) {
  CommandLine line;
  bool flags_ended = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (flags_ended || arg.size() < 2 || arg[0] != '-') {
      line.positional.emplace_back(arg);
      continue;
    }
    if (arg == "--") {
      flags_ended = true;
      continue;
    }
    std::string_view body = arg.substr(arg[1] == '-' ? 2 : 1);
    const size_t equals = body.find('=');
    // Flags are spelled with '-' on the command line (--keep-going) and '_' in C++ (keep_going).
    std::string spelled(body.substr(0, equals));
    std::replace(spelled.begin(), spelled.end(), '-', '_');
    const std::string_view name = spelled;
    if (name.empty()) return absl::InvalidArgumentError(fmt::format("'{}' is not a flag", arg));
    if (IsHelpName(name)) {
      line.help = true;
      continue;
    }
    const absl::CommandLineFlag* flag = Find(name);
    if (flag == nullptr && equals == std::string_view::npos && name.substr(0, 2) == "no") {
      const absl::CommandLineFlag* negated = Find(name.substr(2));
      if (negated != nullptr && negated->IsOfType<bool>()) {
        line.flags.emplace_back(std::string(name.substr(2)), "false");
        continue;
      }
    }
    if (flag == nullptr) return absl::InvalidArgumentError(fmt::format("unknown flag --{}", name));
    if (equals != std::string_view::npos) {
      line.flags.emplace_back(std::string(name), std::string(body.substr(equals + 1)));
    } else if (flag->IsOfType<bool>()) {
      line.flags.emplace_back(std::string(name), "true");
    } else if (i + 1 < argc) {
      line.flags.emplace_back(std::string(name), std::string(argv[++i]));
    } else {
      return absl::InvalidArgumentError(fmt::format("--{} needs a value (--{}=VALUE)", name, name));
    }
  }
  return line;
}

absl::Status ApplyFlags(const CommandLine& line, std::span<const std::string_view> accepted, std::string_view owner) {
  for (const auto& [name, value] : line.flags) {
    if (std::find(accepted.begin(), accepted.end(), name) == accepted.end()) {
      return absl::InvalidArgumentError(fmt::format("{} takes no flag --{}", owner, name));
    }
    absl::CommandLineFlag* flag = Find(name);
    std::string error;
    if (flag == nullptr || !flag->ParseFrom(value, &error)) {
      return absl::InvalidArgumentError(fmt::format("--{}={}: {}", name, value, error));
    }
  }
  return absl::OkStatus();
}

std::string FlagsHelp(std::span<const std::string_view> accepted, std::string_view strip_prefix,
                      std::span<const OwnFlagHelp> own) {
  std::vector<std::pair<std::string, std::string>> rows;
  for (std::string_view name : accepted) {
    const absl::CommandLineFlag* flag = Find(name);
    if (flag == nullptr) continue;
    std::string help = flag->Help();
    if (!strip_prefix.empty() && help.rfind(strip_prefix, 0) == 0) help.erase(0, strip_prefix.size());
    for (const OwnFlagHelp& text : own) {
      if (text.flag == name) help = text.help;
    }
    const bool is_bool = flag->IsOfType<bool>();
    const std::string shown_default = ToString(flag->DefaultValue());
    std::string spelled(name);
    std::replace(spelled.begin(), spelled.end(), '_', '-');
    rows.emplace_back(is_bool ? fmt::format("--[no]{}", spelled) : fmt::format("--{}=VALUE", spelled),
                      fmt::format("{} (default: {})", help, shown_default.empty() ? "none" : shown_default));
  }
  size_t width = 0;
  for (const auto& row : rows) width = std::max(width, row.first.size());
  std::string text;
  for (const auto& [syntax, help] : rows) text += fmt::format("  {:<{}}  {}\n", syntax, width, help);
  return text;
}

std::vector<std::string> UndefinedFlags(std::span<const std::string_view> accepted) {
  std::vector<std::string> missing;
  for (std::string_view name : accepted) {
    if (Find(name) == nullptr) missing.emplace_back(name);
  }
  return missing;
}

}  // namespace mxdiff::cli
