#include "checkpoint/audit_error.h"

#include <optional>

#include "absl/strings/cord.h"
#include "fmt/core.h"
#include "checkpoint/strict_json.h"

namespace mxdiff::checkpoint {

absl::Status TensorError(std::string_view file, std::string_view tensor, std::string_view message) {
  absl::Status status = absl::InvalidArgumentError(fmt::format("{}: tensor {}: {}", file, Quoted(tensor), message));
  status.SetPayload(absl::string_view(kTensorPayload.data(), kTensorPayload.size()),
                    absl::Cord(absl::string_view(tensor.data(), tensor.size())));
  return status;
}

std::string TensorOfError(const absl::Status& status) {
  const auto tensor =
      status.GetPayload(absl::string_view(kTensorPayload.data(), kTensorPayload.size()));
  return tensor ? std::string(*tensor) : std::string();
}

AuditError ErrorOf(std::string_view file, const absl::Status& status) {
  return AuditError{std::string(file), TensorOfError(status), std::string(status.message())};
}

}  // namespace mxdiff::checkpoint
