// The two cursors every case format walks its one field list with (fuzz/formats/case_format.cc,
// fuzz/formats/layer_case_format.cc): ByteReader decodes a field and checks its bounds, ByteWriter checks
// them and encodes, so the two directions of a format cannot drift apart. Integers are
// little-endian. A field is named by a prefix and a name ("codes" ".seed"), joined only in
// messages, which also say where in the input the reader was.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "reference/status_macros.h"

namespace mxdiff::fuzz {

class ByteReader {
 public:
  static constexpr bool kDecoding = true;
  // `what` names the input in messages ("case", "layer case").
  ByteReader(std::span<const uint8_t> bytes, std::string_view what) : bytes_(bytes), what_(what) {}

  absl::Status Int(std::string_view prefix, std::string_view field, int width, int minimum, int maximum,
                   int& value) {
    if (bytes_.size() - offset_ < size_t(width)) return Truncated(prefix, field);
    uint32_t raw = 0;
    for (int i = 0; i < width; ++i) raw |= uint32_t(bytes_[offset_ + i]) << (8 * i);
    if (int64_t(raw) < minimum || int64_t(raw) > maximum) {
      return absl::InvalidArgumentError(
          fmt::format("{}{} = {} at byte {} is outside {}..{}", prefix, field, raw, offset_, minimum, maximum));
    }
    offset_ += size_t(width);
    value = int(raw);
    return absl::OkStatus();
  }
  absl::Status Int(std::string_view field, int width, int minimum, int maximum, int& value) {
    return Int("", field, width, minimum, maximum, value);
  }
  absl::Status U64(std::string_view prefix, std::string_view field, uint64_t& value) {
    if (bytes_.size() - offset_ < 8) return Truncated(prefix, field);
    value = 0;
    for (int i = 0; i < 8; ++i) value |= uint64_t(bytes_[offset_ + i]) << (8 * i);
    offset_ += 8;
    return absl::OkStatus();
  }
  template <typename T>
  absl::Status Array(std::string_view field, std::vector<T>& values, size_t count) {
    if ((bytes_.size() - offset_) / sizeof(T) < count) {
      return absl::InvalidArgumentError(fmt::format("{} truncated in {}: {} bytes needed at byte {}, {} left", what_,
                                                    field, count * sizeof(T), offset_, bytes_.size() - offset_));
    }
    values.resize(count);
    if (count != 0) std::memcpy(values.data(), bytes_.data() + offset_, count * sizeof(T));  // little-endian host
    offset_ += count * sizeof(T);
    return absl::OkStatus();
  }
  size_t offset() const { return offset_; }
  size_t size() const { return bytes_.size(); }

 private:
  absl::Status Truncated(std::string_view prefix, std::string_view field) const {
    return absl::InvalidArgumentError(
        fmt::format("{} truncated at byte {} while reading {}{}", what_, offset_, prefix, field));
  }

  std::span<const uint8_t> bytes_;
  std::string_view what_;
  size_t offset_ = 0;
};

class ByteWriter {
 public:
  static constexpr bool kDecoding = false;
  explicit ByteWriter(std::vector<uint8_t>& out) : out_(out) {}

  absl::Status Int(std::string_view prefix, std::string_view field, int width, int minimum, int maximum,
                   int& value) {
    if (value < minimum || value > maximum) {
      return absl::InvalidArgumentError(
          fmt::format("{}{} = {} is outside {}..{}", prefix, field, value, minimum, maximum));
    }
    for (int i = 0; i < width; ++i) out_.push_back(uint8_t(uint32_t(value) >> (8 * i)));
    return absl::OkStatus();
  }
  absl::Status Int(std::string_view field, int width, int minimum, int maximum, int& value) {
    return Int("", field, width, minimum, maximum, value);
  }
  absl::Status U64(std::string_view, std::string_view, uint64_t& value) {
    for (int i = 0; i < 8; ++i) out_.push_back(uint8_t(value >> (8 * i)));
    return absl::OkStatus();
  }
  template <typename T>
  absl::Status Array(std::string_view field, std::vector<T>& values, size_t count) {
    if (values.size() != count) {
      return absl::InvalidArgumentError(
          fmt::format("{} has {} elements, the shape needs {}", field, values.size(), count));
    }
    const size_t offset = out_.size();
    out_.resize(offset + count * sizeof(T));
    if (count != 0) std::memcpy(out_.data() + offset, values.data(), count * sizeof(T));  // little-endian host
    return absl::OkStatus();
  }

 private:
  std::vector<uint8_t>& out_;
};

}  // namespace mxdiff::fuzz
