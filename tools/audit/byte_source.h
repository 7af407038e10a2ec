// Where the scan gets scale bytes from: windows of the checkpoint's files, mapped one at a time
// (so memory stays bounded by the windows in flight, whatever the checkpoint's size), or
// buffers already in memory (the fuzz target, tests).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mxdiff::audit {

// Bytes [offset, offset + length) of one file, valid while the window lives.
class ByteWindow {
 public:
  ByteWindow() = default;
  ByteWindow(std::span<const uint8_t> bytes, void* mapping, size_t mapping_length)
      : bytes_(bytes), mapping_(mapping), mapping_length_(mapping_length) {}
  ByteWindow(ByteWindow&& other) noexcept { *this = std::move(other); }
  ByteWindow& operator=(ByteWindow&& other) noexcept;
  ByteWindow(const ByteWindow&) = delete;
  ByteWindow& operator=(const ByteWindow&) = delete;
  ~ByteWindow();

  std::span<const uint8_t> bytes() const { return bytes_; }

 private:
  std::span<const uint8_t> bytes_;
  void* mapping_ = nullptr;  // munmap'ed on destruction when set
  size_t mapping_length_ = 0;
};

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Thread-safe.
  virtual absl::StatusOr<ByteWindow> Window(size_t file, uint64_t offset, uint64_t length) const = 0;
};

// The files by path, each window its own read-only mapping (populated at once: a page cache
// hit costs no fault per page).
class MappedFiles final : public ByteSource {
 public:
  explicit MappedFiles(std::vector<std::string> paths) : paths_(std::move(paths)) {}
  absl::StatusOr<ByteWindow> Window(size_t file, uint64_t offset, uint64_t length) const override;

 private:
  std::vector<std::string> paths_;
};

class MemoryFiles final : public ByteSource {
 public:
  explicit MemoryFiles(std::vector<std::span<const uint8_t>> files) : files_(std::move(files)) {}
  absl::StatusOr<ByteWindow> Window(size_t file, uint64_t offset, uint64_t length) const override;

 private:
  std::vector<std::span<const uint8_t>> files_;
};

}  // namespace mxdiff::audit
