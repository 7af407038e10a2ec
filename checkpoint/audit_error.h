// Errors of the audit's input (exit status 2), each naming the file and, where there is one,
// the tensor. Statuses about one tensor carry its name as a payload, so that a report can give
// it as a field without reading messages.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace mxdiff::checkpoint {

struct AuditError {
  std::string file;
  std::string tensor;   // "" when the error is about the file as a whole
  std::string message;  // complete: it names the file and the tensor itself
};

inline constexpr std::string_view kTensorPayload = "mxdiff.audit/tensor";

// InvalidArgument "FILE: tensor "NAME": MESSAGE", with the name as payload.
absl::Status TensorError(std::string_view file, std::string_view tensor, std::string_view message);
std::string TensorOfError(const absl::Status& status);  // "" when the status names no tensor
AuditError ErrorOf(std::string_view file, const absl::Status& status);

}  // namespace mxdiff::checkpoint
