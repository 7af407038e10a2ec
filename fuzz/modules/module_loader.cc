#include "fuzz/modules/module_loader.h"

#include <algorithm>
#include <cstdlib>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "fmt/format.h"
#include "fuzz/modules/external_module.h"
#include "fuzz/driver/target_driver.h"

namespace mxdiff::fuzz {
namespace {

std::vector<std::string> NameList(std::string_view text) {
  std::vector<std::string> names;
  while (!text.empty()) {
    const size_t comma = std::min(text.find(','), text.size());
    if (comma > 0) names.emplace_back(text.substr(0, comma));
    text.remove_prefix(std::min(comma + 1, text.size()));
  }
  return names;
}

bool Contains(const std::vector<std::string>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

bool Matches(const std::vector<std::string>& names, const GemmModule& module, bool external) {
  return Contains(names, module.name()) || (external && Contains(names, "external"));
}

}  // namespace

ModuleSelection ModuleSelectionFromArgs(std::span<const std::string_view> args) {
  ModuleSelection selection;
  bool force_set = false, disable_set = false, external_set = false;
  for (std::string_view arg : args) {
    auto value_of = [&](std::string_view flag, bool& set) -> std::optional<std::string_view> {
      const std::string prefix = fmt::format("--{}=", flag);
      if (arg.substr(0, prefix.size()) != prefix) return std::nullopt;
      set = true;
      return arg.substr(prefix.size());
    };
    if (auto v = value_of("modules", force_set)) selection.force = NameList(*v);
    if (auto v = value_of("disable-modules", disable_set)) selection.disable = NameList(*v);
    if (auto v = value_of("external", external_set)) selection.external_library = std::string(*v);
  }
  auto env = [](const char* name) -> std::string_view {
    const char* value = std::getenv(name);
    return value == nullptr ? std::string_view() : std::string_view(value);
  };
  if (!force_set) selection.force = NameList(env("MXDIFF_MODULES"));
  if (!disable_set) selection.disable = NameList(env("MXDIFF_DISABLE_MODULES"));
  if (!external_set) selection.external_library = std::string(env("MXDIFF_EXTERNAL_KERNEL"));
  return selection;
}

absl::StatusOr<LoadedModules> LoadModules(const ModuleSelection& selection) {
  LoadedModules loaded;
  absl::StatusOr<LoadedModules> builtin = LoadBuiltinModules();
  if (builtin.ok()) {
    loaded = *std::move(builtin);
  } else if (builtin.status().code() == absl::StatusCode::kUnavailable && GpuRequired()) {
    return absl::FailedPreconditionError(
        fmt::format("MXDIFF_REQUIRE_GPU=1 (a GPU is present) but {}", std::string(builtin.status().message())));
  } else if (builtin.status().code() == absl::StatusCode::kUnavailable) {
    loaded.report = fmt::format("no builtin kernel modules: {}\n", std::string(builtin.status().message()));
  } else {
    return builtin.status();  // a GPU that fails the guard is never "no GPU"
  }
  const size_t builtin_count = loaded.modules.size();
  if (!selection.external_library.empty()) {
    absl::StatusOr<std::unique_ptr<GemmModule>> external = LoadExternalModule(selection.external_library);
    if (!external.ok()) return external.status();
    loaded.report += fmt::format("external module {} from {}\n", (*external)->name(), selection.external_library);
    loaded.modules.push_back(*std::move(external));
  }

  std::vector<std::string> known;
  for (const auto& module : loaded.modules) known.push_back(module->name());
  for (const std::vector<std::string>* names : {&selection.force, &selection.disable}) {
    for (const std::string& name : *names) {
      if (Contains(known, name) || (name == "external" && loaded.modules.size() > builtin_count)) continue;
      return absl::NotFoundError(fmt::format(
          "module '{}' is not available here (loaded: {}){}", name, known.empty() ? "none" : absl::StrJoin(known, ", "),
          builtin_count == 0 ? fmt::format("; {}", loaded.report) : ""));
    }
  }
  std::vector<std::unique_ptr<GemmModule>> kept;
  for (size_t i = 0; i < loaded.modules.size(); ++i) {
    const bool external = i >= builtin_count;
    if (!selection.force.empty() && !Matches(selection.force, *loaded.modules[i], external)) continue;
    if (Matches(selection.disable, *loaded.modules[i], external)) continue;
    kept.push_back(std::move(loaded.modules[i]));
  }
  loaded.modules = std::move(kept);
  std::vector<std::string> names;
  for (const auto& module : loaded.modules) names.push_back(module->name());
  loaded.report += fmt::format("modules: {}\n", names.empty() ? "none (the CPU side only)" : absl::StrJoin(names, ", "));
  return loaded;
}

}  // namespace mxdiff::fuzz
