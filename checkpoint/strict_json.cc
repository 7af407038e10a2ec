#include "checkpoint/strict_json.h"

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "fmt/core.h"
#include "checkpoint/audit_error.h"

namespace mxdiff::checkpoint {
namespace {

using nlohmann::json;

// Builds the document from nlohmann's SAX events, refusing a key repeated within one object and
// nesting deeper than allowed. A key is looked up in its own object only and nothing is walked
// again, so a parse takes time in proportion to the text (times a log for the lookups);
// nlohmann's callback parser, the other way to see keys, walks the parent object again after
// every object it closes: quadratic in the tensors of a header (issue 23, item 10).
class StrictDomBuilder {
 public:
  enum class Failure { kNone, kSyntax, kStrictness, kDuplicateTensor };

  StrictDomBuilder(int max_depth, int tensor_key_depth) : max_depth_(max_depth), tensor_key_depth_(tensor_key_depth) {}

  bool null() { return Add(json(nullptr)); }
  bool boolean(bool value) { return Add(json(value)); }
  bool number_integer(json::number_integer_t value) { return Add(json(value)); }
  bool number_unsigned(json::number_unsigned_t value) { return Add(json(value)); }
  bool number_float(json::number_float_t value, const json::string_t&) { return Add(json(value)); }
  bool string(json::string_t& value) { return Add(json(std::move(value))); }
  bool binary(json::binary_t& value) { return Add(json(json::binary_t(std::move(value)))); }

  bool start_object(std::size_t) { return Open(json::object()); }
  bool start_array(std::size_t) { return Open(json::array()); }
  bool end_object() { return Close(); }
  bool end_array() { return Close(); }

  bool key(json::string_t& name) {
    json& object = *open_.back();
    // `depth` as nlohmann's callback counted it: the containers around the key.
    const int depth = int(open_.size());
    if (object.contains(name)) {
      if (depth == tensor_key_depth_) {
        duplicate_tensor_ = name;
        return Fail(Failure::kDuplicateTensor, "named twice (the JSON parser would silently keep only one of them)");
      }
      return Fail(Failure::kStrictness, fmt::format("duplicate name {} in one JSON object", Quoted(name)));
    }
    pending_value_ = &object[std::move(name)];
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const json::exception& error) {
    return Fail(Failure::kSyntax, error.what());
  }

  Failure failure() const { return failure_; }
  const std::string& message() const { return message_; }
  const std::string& duplicate_tensor() const { return duplicate_tensor_; }
  json TakeResult() { return std::move(root_); }

 private:
  bool Fail(Failure failure, std::string message) {
    failure_ = failure;
    message_ = std::move(message);
    return false;  // stops the parse
  }

  // Where the next value goes: the root, the slot of the key just read, or an array's end.
  json* Place(json value) {
    if (open_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    json& container = *open_.back();
    if (container.is_array()) {
      container.push_back(std::move(value));
      return &container.back();
    }
    *pending_value_ = std::move(value);
    return pending_value_;
  }

  bool Add(json value) {
    Place(std::move(value));
    return true;
  }

  bool Open(json container) {
    if (int(open_.size()) >= max_depth_) {
      return Fail(Failure::kStrictness, fmt::format("nested deeper than the format allows ({} levels)", max_depth_));
    }
    open_.push_back(Place(std::move(container)));
    return true;
  }

  bool Close() {
    open_.pop_back();
    return true;
  }

  const int max_depth_;
  const int tensor_key_depth_;
  json root_;
  std::vector<json*> open_;  // the containers being filled, outermost first
  json* pending_value_ = nullptr;
  Failure failure_ = Failure::kNone;
  std::string message_;
  std::string duplicate_tensor_;
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
  StrictDomBuilder builder(max_depth, tensor_key_depth);
  json::sax_parse(text.begin(), text.end(), &builder, json::input_format_t::json, /*strict=*/true,
                  /*ignore_comments=*/false);
  switch (builder.failure()) {
    case StrictDomBuilder::Failure::kNone:
      return builder.TakeResult();
    case StrictDomBuilder::Failure::kDuplicateTensor:
      return TensorError(file, builder.duplicate_tensor(), builder.message());
    case StrictDomBuilder::Failure::kStrictness:
      return absl::InvalidArgumentError(fmt::format("{}: {}", file, builder.message()));
    case StrictDomBuilder::Failure::kSyntax: {
      // nlohmann's message carries the byte position ("parse error at line 1, column 17: ...").
      std::string message = builder.message();
      if (const size_t cut = message.find("] "); message.starts_with("[json.exception") && cut != std::string::npos) {
        message = message.substr(cut + 2);
      }
      return absl::InvalidArgumentError(fmt::format("{}: invalid JSON: {}", file, message));
    }
  }
  return absl::InternalError(fmt::format("{}: JSON parse ended in no known state", file));
}

}  // namespace mxdiff::checkpoint
