// Hardware-recorded step vectors (tests/vectors/README.md): one CSV row per output element of
// a chain of m8n8k4 steps, columns a0..a(K-1), b0..b(K-1) as fp16 bits, then c and d as fp32
// bits, lowercase hex without 0x; K a multiple of 4, the same for every row of a file. Lines
// starting with '#' are comments. `mxdiff vectors` checks these files and `mxdiff calibrate`
// writes them, both through this one parser and writer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "reference/step_model.h"

namespace mxdiff {

struct VectorRow {
  int line = 0;  // 1-based line in the file (0 for rows built in memory)
  std::vector<uint16_t> a;
  std::vector<uint16_t> b;
  uint32_t c = 0;
  uint32_t d = 0;  // what the device produced
};

struct VectorFile {
  std::string name;                   // path or label used in error messages
  int k = 0;                          // products per row
  std::vector<std::string> comments;  // comment lines without the leading '#'
  std::vector<VectorRow> rows;
};

// Errors are InvalidArgument "name:line: what" (malformed hex, wrong column count, K not a
// multiple of 4, K differing from the first row's); NotFound / PermissionDenied-style errors
// from reading name the path. ReadVectorFile rejects a directory, a line longer than
// kMaxVectorLineBytes and a file larger than kMaxVectorFileBytes (InvalidArgument) without
// reading further, so /dev/zero or a stray binary fails fast instead of exhausting memory.
inline constexpr size_t kMaxVectorLineBytes = size_t(1) << 20;  // a K = 4096 row is ~41 KB
inline constexpr size_t kMaxVectorFileBytes = size_t(1) << 28;
absl::StatusOr<VectorFile> ParseVectorFile(std::string_view text, std::string_view name);
absl::StatusOr<VectorFile> ReadVectorFile(const std::string& path);

std::string FormatVectorRow(const VectorRow& row);
std::string FormatVectorFile(const VectorFile& file);  // comments, then rows
absl::Status WriteVectorFile(const std::string& path, const VectorFile& file);

// The model's result for a row: the steps chained over ascending k from c.
uint32_t EvaluateVectorRow(StepModel model, const VectorRow& row);

// Equivalence policy: identical bits, except that any NaN matches any NaN (devices differ in
// the payload they produce; the models give the canonical 0x7FFFFFFF).
bool VectorResultMatches(uint32_t expected, uint32_t got);

}  // namespace mxdiff
