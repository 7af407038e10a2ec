#include "tools/audit/strict_json.h"

#include <optional>
#include <set>
#include <stdexcept>
#include <vector>

#include "fmt/core.h"
#include "tools/audit/audit_error.h"

namespace mxdiff::audit {
namespace {

using nlohmann::json;

// Thrown from the parser callback: nlohmann's callback cannot stop a parse any other way.
struct StrictnessError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace

std::string Quoted(std::string_view text, size_t max_chars) {
  const bool cut = text.size() > max_chars;
  // Cutting may split a UTF-8 sequence: `replace` keeps the dump well-formed.
  std::string quoted = json(std::string(text.substr(0, max_chars))).dump(-1, ' ', false, json::error_handler_t::replace);
  if (cut) quoted += fmt::format("... ({} bytes)", text.size());
  return quoted;
}

absl::StatusOr<json> ParseStrictJson(std::string_view file, std::string_view text, int max_depth,
                                     int tensor_key_depth) {
  std::optional<std::string> duplicate_tensor;
  std::vector<std::set<std::string>> keys;  // the keys seen so far in each open object
  const json::parser_callback_t callback = [&](int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        // `depth` counts the containers around this one.
        if (depth >= max_depth) {
          throw StrictnessError(fmt::format("nested deeper than the format allows ({} levels)", max_depth));
        }
        if (event == json::parse_event_t::object_start) keys.emplace_back();
        break;
      case json::parse_event_t::key:
        if (!keys.back().insert(parsed.get<std::string>()).second) {
          if (depth == tensor_key_depth) {
            duplicate_tensor = parsed.get<std::string>();
            throw StrictnessError("named twice (the JSON parser would silently keep only one of them)");
          }
          throw StrictnessError(fmt::format("duplicate name {} in one JSON object", Quoted(parsed.get<std::string>())));
        }
        break;
      case json::parse_event_t::object_end:
        keys.pop_back();
        break;
      default:
        break;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const StrictnessError& error) {
    if (duplicate_tensor) return TensorError(file, *duplicate_tensor, error.what());
    return absl::InvalidArgumentError(fmt::format("{}: {}", file, error.what()));
  } catch (const json::exception& error) {
    // nlohmann's message carries the byte position ("parse error at line 1, column 17: ...").
    std::string message = error.what();
    if (const size_t cut = message.find("] "); message.starts_with("[json.exception") && cut != std::string::npos) {
      message = message.substr(cut + 2);
    }
    return absl::InvalidArgumentError(fmt::format("{}: invalid JSON: {}", file, message));
  }
}

}  // namespace mxdiff::audit
