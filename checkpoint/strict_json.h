// JSON parsing for the audit's inputs (safetensors headers, index files), with nlohmann-json
// made strict where its defaults are lenient: a key repeated within one object is an error
// (nlohmann keeps one of them silently), and so is nesting deeper than the format can have.
// Invalid JSON and ill-formed UTF-8 inside strings are nlohmann's own errors.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace mxdiff::checkpoint {

// `file` names the input in errors. `max_depth` is the deepest container nesting allowed: 1 for
// a flat object, 2 for an object of arrays, ... Keys at `tensor_key_depth` (1: the top object's
// keys, 2: those of objects inside it) are tensor names: a repeated one is reported as a
// repeated tensor (audit_error.h payload).
absl::StatusOr<nlohmann::json> ParseStrictJson(std::string_view file, std::string_view text, int max_depth,
                                               int tensor_key_depth);

// A name or string from an input, quoted for a message: JSON escapes for control bytes and
// quotes, cut to `max_chars` (names in a fuzzed header can be megabytes long).
std::string Quoted(std::string_view text, size_t max_chars = 160);

}  // namespace mxdiff::checkpoint
