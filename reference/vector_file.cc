#include "reference/vector_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "fmt/core.h"
#include "reference/fp16.h"

namespace mxdiff {
namespace {

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.back() == '\r' || text.back() == ' ' || text.back() == '\t')) {
    text.remove_suffix(1);
  }
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  return text;
}

// Strict hex: 1..max_digits hex digits, nothing else.
bool ParseHex(std::string_view text, int max_digits, uint32_t& value) {
  if (text.empty() || int(text.size()) > max_digits) return false;
  value = 0;
  for (char ch : text) {
    int digit;
    if (ch >= '0' && ch <= '9') {
      digit = ch - '0';
    } else if (ch >= 'a' && ch <= 'f') {
      digit = ch - 'a' + 10;
    } else if (ch >= 'A' && ch <= 'F') {
      digit = ch - 'A' + 10;
    } else {
      return false;
    }
    value = value * 16 + uint32_t(digit);
  }
  return true;
}

// Splits on every separator, keeping empty pieces (absl::string_view is not std::string_view in
// the Debian build, so absl::StrSplit does not take one).
std::vector<std::string_view> Split(std::string_view text, char separator) {
  std::vector<std::string_view> pieces;
  size_t begin = 0;
  while (true) {
    const size_t end = text.find(separator, begin);
    pieces.push_back(
        text.substr(begin, end == std::string_view::npos ? std::string_view::npos : end - begin));
    if (end == std::string_view::npos) return pieces;
    begin = end + 1;
  }
}

absl::Status RowError(std::string_view name, int line, std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("{}:{}: {}", name, line, what));
}

}  // namespace

absl::StatusOr<VectorFile> ParseVectorFile(std::string_view text, std::string_view name) {
  VectorFile file;
  file.name = std::string(name);
  int line_number = 0;
  for (std::string_view raw_line : Split(text, '\n')) {
    ++line_number;
    const std::string_view line = Trim(raw_line);
    if (line.empty()) continue;
    if (line.front() == '#') {
      file.comments.emplace_back(Trim(line.substr(1)));
      continue;
    }
    const std::vector<std::string_view> columns = Split(line, ',');
    const int count = int(columns.size());
    if (count < 10 || (count - 2) % 8 != 0) {
      return RowError(name, line_number,
                      fmt::format("{} columns; a row has 2K + 2 columns with K a positive multiple of 4 "
                                  "(a0..a(K-1), b0..b(K-1), c, d)",
                                  count));
    }
    const int k = (count - 2) / 2;
    if (file.k == 0) file.k = k;
    if (k != file.k) {
      return RowError(
          name, line_number,
          fmt::format("{} columns (K = {}) but the file's first row has K = {}", count, k, file.k));
    }
    VectorRow row;
    row.line = line_number;
    row.a.resize(k);
    row.b.resize(k);
    for (int column = 0; column < count; ++column) {
      const bool is_f16 = column < 2 * k;
      uint32_t value;
      if (!ParseHex(Trim(columns[column]), is_f16 ? 4 : 8, value)) {
        const std::string label = column < k        ? fmt::format("a{}", column)
                                  : column < 2 * k  ? fmt::format("b{}", column - k)
                                  : column == 2 * k ? std::string("c")
                                                    : std::string("d");
        return RowError(name, line_number,
                        fmt::format("column {} ({}) is '{}', expected {} hex digits", column + 1, label,
                                    Trim(columns[column]), is_f16 ? "1..4" : "1..8"));
      }
      if (column < k) {
        row.a[column] = uint16_t(value);
      } else if (column < 2 * k) {
        row.b[column - k] = uint16_t(value);
      } else if (column == 2 * k) {
        row.c = value;
      } else {
        row.d = value;
      }
    }
    file.rows.push_back(std::move(row));
  }
  if (file.rows.empty()) return absl::InvalidArgumentError(fmt::format("{}: no data rows", name));
  return file;
}

absl::StatusOr<VectorFile> ReadVectorFile(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    return absl::InvalidArgumentError(fmt::format("{}: is a directory, not a vectors file", path));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int error_number = errno;
    const std::string message = fmt::format("{}: cannot open: {}", path, std::strerror(error_number));
    return error_number == ENOENT ? absl::NotFoundError(message) : absl::PermissionDeniedError(message);
  }
  // Bounded reads: a device such as /dev/zero (no newline, no end) or a huge file that is not a
  // vectors file is rejected after at most kMaxVectorLineBytes / kMaxVectorFileBytes, instead of
  // exhausting memory.
  std::string contents;
  size_t line_start = 0;
  int line_number = 1;
  char buffer[1 << 16];
  while (in) {
    in.read(buffer, sizeof buffer);
    const size_t got = size_t(in.gcount());
    if (got == 0) break;
    if (contents.size() + got > kMaxVectorFileBytes) {
      return absl::InvalidArgumentError(
          fmt::format("{}: larger than {} MiB: not a vectors file", path, kMaxVectorFileBytes >> 20));
    }
    const size_t scanned = contents.size();
    contents.append(buffer, got);
    for (size_t i = scanned; i < contents.size(); ++i) {
      if (contents[i] != '\n') continue;
      line_start = i + 1;
      ++line_number;
    }
    if (contents.size() - line_start > kMaxVectorLineBytes) {
      return absl::InvalidArgumentError(fmt::format("{}:{}: line longer than {} KiB: not a vectors file", path,
                                                    line_number, kMaxVectorLineBytes >> 10));
    }
  }
  if (in.bad()) return absl::DataLossError(fmt::format("{}: read error", path));
  return ParseVectorFile(contents, path);
}

std::string FormatVectorRow(const VectorRow& row) {
  std::string text;
  for (uint16_t value : row.a) text += fmt::format("{:04x},", value);
  for (uint16_t value : row.b) text += fmt::format("{:04x},", value);
  text += fmt::format("{:08x},{:08x}", row.c, row.d);
  return text;
}

std::string FormatVectorFile(const VectorFile& file) {
  std::string text;
  for (const std::string& comment : file.comments) text += fmt::format("# {}\n", comment);
  for (const VectorRow& row : file.rows) text += FormatVectorRow(row) + "\n";
  return text;
}

absl::Status WriteVectorFile(const std::string& path, const VectorFile& file) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out)
    return absl::PermissionDeniedError(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
  out << FormatVectorFile(file);
  out.flush();
  if (!out) return absl::DataLossError(fmt::format("{}: write failed", path));
  return absl::OkStatus();
}

uint32_t EvaluateVectorRow(StepModel model, const VectorRow& row) {
  return ChainSteps(model, row.c, row.a, row.b);
}

bool VectorResultMatches(uint32_t expected, uint32_t got) {
  return expected == got || (f32_is_nan(expected) && f32_is_nan(got));
}

}  // namespace mxdiff
