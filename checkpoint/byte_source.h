// Where the scan gets scale bytes from: windows of the checkpoint's files, mapped one at a time
// (so memory stays bounded by the windows in flight, whatever the checkpoint's size), or
// buffers already in memory (the fuzz target, tests). The scan itself reads with `Read` into a
// buffer of each thread's own (pread on a descriptor opened once per file): mapping and unmapping
// a window per chunk changes the process's page tables, which serialises the threads (mmap
// lock, TLB shootdowns) so that two threads were slower than one (issue 23, item 16).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mxdiff::checkpoint {

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
  // The same bytes, read into `buffer` (grown as needed, reused by the caller) or, where they
  // are in memory already, in place: valid until `buffer` changes. Thread-safe for distinct
  // buffers. The default copies a Window.
  virtual absl::StatusOr<std::span<const uint8_t>> Read(size_t file, uint64_t offset, uint64_t length,
                                                        std::vector<uint8_t>& buffer) const;
};

// The files by path, each window its own read-only mapping (populated at once: a page cache
// hit costs no fault per page); `Read` is pread on a descriptor opened at the first read of
// the file and kept until the source is destroyed.
class MappedFiles final : public ByteSource {
 public:
  explicit MappedFiles(std::vector<std::string> paths);
  ~MappedFiles() override;
  MappedFiles(const MappedFiles&) = delete;
  MappedFiles& operator=(const MappedFiles&) = delete;
  absl::StatusOr<ByteWindow> Window(size_t file, uint64_t offset, uint64_t length) const override;
  absl::StatusOr<std::span<const uint8_t>> Read(size_t file, uint64_t offset, uint64_t length,
                                                std::vector<uint8_t>& buffer) const override;

 private:
  absl::StatusOr<int> Descriptor(size_t file) const;

  std::vector<std::string> paths_;
  mutable std::mutex mutex_;       // guards descriptors_
  mutable std::vector<int> descriptors_;  // -1: not opened yet
};

class MemoryFiles final : public ByteSource {
 public:
  explicit MemoryFiles(std::vector<std::span<const uint8_t>> files) : files_(std::move(files)) {}
  absl::StatusOr<ByteWindow> Window(size_t file, uint64_t offset, uint64_t length) const override;
  absl::StatusOr<std::span<const uint8_t>> Read(size_t file, uint64_t offset, uint64_t length,
                                                std::vector<uint8_t>& buffer) const override;

 private:
  std::vector<std::span<const uint8_t>> files_;
};

}  // namespace mxdiff::checkpoint
