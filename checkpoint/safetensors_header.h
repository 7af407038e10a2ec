// The safetensors format: an 8-byte little-endian header length N, N bytes of JSON (an object:
// per tensor `dtype`, `shape`, `data_offsets` relative to the data section; optional
// `__metadata__` of strings), then the data section. Validated as the official implementation
// does (known dtype, byte size = elements x dtype size, offsets that tile the data section with
// no gap, overlap or trailing byte, header at most 100 MB) and stricter where it is silent
// (a repeated name is an error). Every error names the file and, where there is one, the tensor.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"

namespace mxdiff::checkpoint {

enum class Dtype : uint8_t {
  kBool, kF4, kF6E2M3, kF6E3M2, kU8, kI8, kF8E5M2, kF8E4M3, kF8E8M0, kF8E4M3Fnuz, kF8E5M2Fnuz,
  kI16, kU16, kF16, kBF16, kI32, kU32, kF32, kC64, kF64, kI64, kU64,
};

std::optional<Dtype> ParseDtype(std::string_view name);  // "F8_E8M0" -> kF8E8M0
std::string_view DtypeName(Dtype dtype);
int DtypeBits(Dtype dtype);  // 4 for F4, 6 for F6_*, 8 for U8, ...

struct TensorInfo {
  std::string name;
  Dtype dtype = Dtype::kU8;
  std::vector<uint64_t> shape;
  uint64_t begin = 0;  // data_offsets, relative to the data section
  uint64_t end = 0;
  uint64_t byte_size() const { return end - begin; }
  uint64_t elements() const;  // product of the shape (checked against overflow when parsed)
};

inline constexpr uint64_t kMaxHeaderLength = 100'000'000;  // the official implementation's limit

struct SafetensorsHeader {
  uint64_t header_length = 0;  // N
  uint64_t data_start = 0;     // 8 + N: file offset of the data section
  uint64_t data_size = 0;
  std::vector<TensorInfo> tensors;  // in data order (ascending offsets)
  std::map<std::string, std::string> metadata;
  std::unordered_map<std::string, size_t> by_name;  // name -> index into tensors

  const TensorInfo* Find(std::string_view name) const;
};

// The JSON (`header_json`, the N bytes after the length) of a file of `file_size` bytes. `file`
// names it in errors.
absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(std::string_view file, std::string_view header_json,
                                                         uint64_t header_length, uint64_t file_size);

// A whole file in memory (the fuzz target, tests).
absl::StatusOr<SafetensorsHeader> ParseSafetensorsBuffer(std::string_view file, std::span<const uint8_t> bytes);

// Reads the length and the header of the file at `path` (never its data).
absl::StatusOr<SafetensorsHeader> ReadSafetensorsHeader(const std::string& path);

// "[2048, 128]"
std::string FormatShape(std::span<const uint64_t> shape);

}  // namespace mxdiff::checkpoint
