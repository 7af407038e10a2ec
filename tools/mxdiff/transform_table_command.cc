// mxdiff transform-table: both transforms for all 16 codes x 256 scale bytes as CSV, code-major
// (code 0 with raw 0..255, then code 1, ...). fp16 bits as 4 lowercase hex digits; admitted is
// the fold admission of the raw byte (admission.h), 0 or 1.
#include "fmt/core.h"
#include "reference/admission.h"
#include "reference/transform.h"
#include "tools/mxdiff/commands.h"

namespace mxdiff::cli {

int TransformTableCommand(std::span<const std::string_view> args) {
  if (!args.empty()) {
    fmt::print(stderr, "mxdiff transform-table: takes no arguments, got '{}'\n", args.front());
    return kExitBadInput;
  }
  std::string csv = "code,raw,ordinary,folded,admitted\n";
  for (int code = 0; code < 16; ++code) {
    for (int raw = 0; raw < 256; ++raw) {
      const uint16_t ordinary =
          dequantize(Transform::kOrdinary, uint8_t(code), prepared_scale(Transform::kOrdinary, uint8_t(raw)));
      const uint16_t folded =
          dequantize(Transform::kFolded, uint8_t(code), prepared_scale(Transform::kFolded, uint8_t(raw)));
      csv += fmt::format("{},{},{:04x},{:04x},{}\n", code, raw, ordinary, folded,
                         FoldAdmitted(uint8_t(raw)) ? 1 : 0);
    }
  }
  fmt::print("{}", csv);
  return kExitOk;
}

}  // namespace mxdiff::cli
