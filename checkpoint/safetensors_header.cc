#include "checkpoint/safetensors_header.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <tuple>

#include "fmt/core.h"
#include "nlohmann/json.hpp"
#include "checkpoint/audit_error.h"
#include "checkpoint/strict_json.h"

namespace mxdiff::checkpoint {
namespace {

using nlohmann::json;

struct DtypeInfo {
  Dtype dtype;
  std::string_view name;
  int bits;
};

// The official implementation's dtypes (safetensors 0.8), in its order.
constexpr std::array<DtypeInfo, 22> kDtypes = {{
    {Dtype::kBool, "BOOL", 8},         {Dtype::kF4, "F4", 4},
    {Dtype::kF6E2M3, "F6_E2M3", 6},    {Dtype::kF6E3M2, "F6_E3M2", 6},
    {Dtype::kU8, "U8", 8},             {Dtype::kI8, "I8", 8},
    {Dtype::kF8E5M2, "F8_E5M2", 8},    {Dtype::kF8E4M3, "F8_E4M3", 8},
    {Dtype::kF8E8M0, "F8_E8M0", 8},    {Dtype::kF8E4M3Fnuz, "F8_E4M3FNUZ", 8},
    {Dtype::kF8E5M2Fnuz, "F8_E5M2FNUZ", 8}, {Dtype::kI16, "I16", 16},
    {Dtype::kU16, "U16", 16},          {Dtype::kF16, "F16", 16},
    {Dtype::kBF16, "BF16", 16},        {Dtype::kI32, "I32", 32},
    {Dtype::kU32, "U32", 32},          {Dtype::kF32, "F32", 32},
    {Dtype::kC64, "C64", 64},          {Dtype::kF64, "F64", 64},
    {Dtype::kI64, "I64", 64},          {Dtype::kU64, "U64", 64},
}};

const DtypeInfo& InfoOf(Dtype dtype) { return kDtypes[size_t(dtype)]; }

absl::Status FileError(std::string_view file, std::string_view message) {
  return absl::InvalidArgumentError(fmt::format("{}: {}", file, message));
}


// A JSON array of unsigned integers ("shape", "data_offsets").
absl::StatusOr<std::vector<uint64_t>> UnsignedArray(std::string_view file, std::string_view tensor,
                                                    std::string_view key, const json& value) {
  if (!value.is_array()) return TensorError(file, tensor, fmt::format("'{}' is not an array", key));
  std::vector<uint64_t> numbers;
  numbers.reserve(value.size());
  for (const json& element : value) {
    if (!element.is_number_unsigned()) {
      return TensorError(file, tensor,
                         fmt::format("'{}' holds {}, not a non-negative integer", key,
                                     Quoted(element.dump(-1, ' ', false, json::error_handler_t::replace), 40)));
    }
    numbers.push_back(element.get<uint64_t>());
  }
  return numbers;
}

absl::StatusOr<TensorInfo> ParseTensor(std::string_view file, const std::string& name, const json& entry) {
  if (!entry.is_object()) return TensorError(file, name, "entry is not a JSON object");
  TensorInfo tensor;
  tensor.name = name;
  for (std::string_view key : {"dtype", "shape", "data_offsets"}) {
    if (!entry.contains(key)) return TensorError(file, name, fmt::format("no '{}'", key));
  }
  const json& dtype = entry.at("dtype");
  if (!dtype.is_string()) return TensorError(file, name, "'dtype' is not a string");
  const std::optional<Dtype> parsed = ParseDtype(dtype.get<std::string>());
  if (!parsed) return TensorError(file, name, fmt::format("unknown dtype {}", Quoted(dtype.get<std::string>(), 40)));
  tensor.dtype = *parsed;
  absl::StatusOr<std::vector<uint64_t>> shape = UnsignedArray(file, name, "shape", entry.at("shape"));
  if (!shape.ok()) return shape.status();
  tensor.shape = *std::move(shape);
  absl::StatusOr<std::vector<uint64_t>> offsets = UnsignedArray(file, name, "data_offsets", entry.at("data_offsets"));
  if (!offsets.ok()) return offsets.status();
  if (offsets->size() != 2) {
    return TensorError(file, name, fmt::format("'data_offsets' has {} entries, not [begin, end]", offsets->size()));
  }
  tensor.begin = (*offsets)[0];
  tensor.end = (*offsets)[1];
  if (tensor.begin > tensor.end) {
    return TensorError(file, name,
                       fmt::format("data_offsets [{}, {}] are reversed (begin after end)", tensor.begin, tensor.end));
  }
  // bits = elements x dtype bits, without overflow; it must fill whole bytes.
  uint64_t bits = uint64_t(InfoOf(tensor.dtype).bits);
  for (uint64_t dimension : tensor.shape) {
    if (dimension != 0 && bits > UINT64_MAX / dimension) {
      return TensorError(file, name, fmt::format("shape {} is too large", FormatShape(tensor.shape)));
    }
    bits *= dimension;
  }
  if (bits % 8 != 0) {
    return TensorError(file, name,
                       fmt::format("shape {} of dtype {} does not fill whole bytes", FormatShape(tensor.shape),
                                   DtypeName(tensor.dtype)));
  }
  if (bits / 8 != tensor.byte_size()) {
    return TensorError(file, name,
                       fmt::format("shape {} of dtype {} needs {} bytes, data_offsets [{}, {}] hold {}",
                                   FormatShape(tensor.shape), DtypeName(tensor.dtype), bits / 8, tensor.begin,
                                   tensor.end, tensor.byte_size()));
  }
  return tensor;
}

}  // namespace

std::optional<Dtype> ParseDtype(std::string_view name) {
  for (const DtypeInfo& info : kDtypes) {
    if (info.name == name) return info.dtype;
  }
  return std::nullopt;
}

std::string_view DtypeName(Dtype dtype) { return InfoOf(dtype).name; }
int DtypeBits(Dtype dtype) { return InfoOf(dtype).bits; }

uint64_t TensorInfo::elements() const {
  uint64_t count = 1;
  for (uint64_t dimension : shape) count *= dimension;
  return count;
}

const TensorInfo* SafetensorsHeader::Find(std::string_view name) const {
  const auto found = by_name.find(std::string(name));
  return found == by_name.end() ? nullptr : &tensors[found->second];
}

std::string FormatShape(std::span<const uint64_t> shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += fmt::format("{}{}", i ? ", " : "", shape[i]);
  return text + "]";
}

absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(std::string_view file, std::string_view header_json,
                                                         uint64_t header_length, uint64_t file_size) {
  SafetensorsHeader header;
  header.header_length = header_length;
  header.data_start = 8 + header_length;
  header.data_size = file_size - header.data_start;
  if (header_json.empty() || header_json.front() != '{') {
    return FileError(file, "header: does not start with '{' (not a safetensors file?)");
  }
  // Depth 3: the header object, a tensor's object, its shape array.
  absl::StatusOr<json> parsed = ParseStrictJson(file, header_json, 3, /*tensor_key_depth=*/1);
  if (!parsed.ok()) return parsed.status();
  if (!parsed->is_object()) return FileError(file, "header: not a JSON object");
  for (const auto& [name, entry] : parsed->items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) return FileError(file, "header: '__metadata__' is not an object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) {
          return FileError(file, fmt::format("header: '__metadata__' entry {} is not a string", Quoted(key)));
        }
        header.metadata.emplace(key, value.get<std::string>());
      }
      continue;
    }
    absl::StatusOr<TensorInfo> tensor = ParseTensor(file, name, entry);
    if (!tensor.ok()) return tensor.status();
    header.tensors.push_back(*std::move(tensor));
  }
  std::sort(header.tensors.begin(), header.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  // The tensors must tile the data section: each begins where the one before ends.
  uint64_t covered = 0;
  const TensorInfo* previous = nullptr;
  for (const TensorInfo& tensor : header.tensors) {
    if (tensor.end > header.data_size) {
      return TensorError(file, tensor.name,
                         fmt::format("data_offsets [{}, {}] reach beyond the data section ({} bytes): the file is "
                                     "truncated or the offsets are out of range",
                                     tensor.begin, tensor.end, header.data_size));
    }
    if (tensor.begin < covered) {
      return TensorError(file, tensor.name,
                         fmt::format("data_offsets [{}, {}] overlap tensor {} at [{}, {}]", tensor.begin, tensor.end,
                                     Quoted(previous->name), previous->begin, previous->end));
    }
    if (tensor.begin > covered) {
      return TensorError(
          file, tensor.name,
          previous == nullptr
              ? fmt::format("data_offsets [{}, {}] leave the first {} bytes of the data section unused", tensor.begin,
                            tensor.end, tensor.begin)
              : fmt::format("data_offsets [{}, {}] leave a gap of {} bytes after tensor {} at [{}, {}]", tensor.begin,
                            tensor.end, tensor.begin - covered, Quoted(previous->name), previous->begin,
                            previous->end));
    }
    covered = tensor.end;
    previous = &tensor;
  }
  if (covered != header.data_size) {
    return FileError(file, fmt::format("{} bytes after the last tensor's data (the data section has {}, the tensors "
                                       "cover {})",
                                       header.data_size - covered, header.data_size, covered));
  }
  for (size_t i = 0; i < header.tensors.size(); ++i) header.by_name.emplace(header.tensors[i].name, i);
  return header;
}

namespace {

// The length prefix and its bounds, shared by the buffer and the file readers.
absl::StatusOr<uint64_t> HeaderLength(std::string_view file, const uint8_t* prefix, uint64_t file_size) {
  if (file_size < 8) {
    return FileError(file, fmt::format("truncated: {} bytes, but a safetensors file starts with an 8-byte header "
                                       "length",
                                       file_size));
  }
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | prefix[i];
  if (length > kMaxHeaderLength) {
    return FileError(file, fmt::format("header length {} exceeds the format's limit of {} bytes", length,
                                       kMaxHeaderLength));
  }
  if (length > file_size - 8) {
    return FileError(file, fmt::format("header length {} reaches beyond the end of the file ({} bytes): truncated?",
                                       length, file_size));
  }
  return length;
}

}  // namespace

absl::StatusOr<SafetensorsHeader> ParseSafetensorsBuffer(std::string_view file, std::span<const uint8_t> bytes) {
  absl::StatusOr<uint64_t> length = HeaderLength(file, bytes.data(), bytes.size());
  if (!length.ok()) return length.status();
  const std::string_view json_text(reinterpret_cast<const char*>(bytes.data()) + 8, size_t(*length));
  return ParseSafetensorsHeader(file, json_text, *length, bytes.size());
}

absl::StatusOr<SafetensorsHeader> ReadSafetensorsHeader(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused as not a regular file).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return absl::NotFoundError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat status {};
  if (::fstat(fd, &status) != 0) return FileError(path, fmt::format("cannot stat: {}", std::strerror(errno)));
  if (!S_ISREG(status.st_mode)) return FileError(path, "not a regular file");
  const uint64_t file_size = uint64_t(status.st_size);
  auto read_at = [&](void* buffer, size_t size, uint64_t offset) -> absl::Status {
    size_t done = 0;
    while (done < size) {
      const ssize_t got = ::pread(fd, static_cast<char*>(buffer) + done, size - done, off_t(offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) return FileError(path, fmt::format("read error: {}", std::strerror(errno)));
      if (got == 0) return FileError(path, "truncated while reading the header (the file shrank?)");
      done += size_t(got);
    }
    return absl::OkStatus();
  };
  uint8_t prefix[8] = {};
  if (file_size >= 8) {
    if (absl::Status status = read_at(prefix, 8, 0); !status.ok()) return status;
  }
  absl::StatusOr<uint64_t> length = HeaderLength(path, prefix, file_size);
  if (!length.ok()) return length.status();
  std::string json_text(size_t(*length), '\0');
  if (absl::Status status = read_at(json_text.data(), json_text.size(), 8); !status.ok()) return status;
  return ParseSafetensorsHeader(path, json_text, *length, file_size);
}

}  // namespace mxdiff::checkpoint
