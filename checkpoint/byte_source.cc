#include "checkpoint/byte_source.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "fmt/core.h"

namespace mxdiff::checkpoint {

ByteWindow& ByteWindow::operator=(ByteWindow&& other) noexcept {
  if (this != &other) {
    if (mapping_ != nullptr) ::munmap(mapping_, mapping_length_);
    bytes_ = other.bytes_;
    mapping_ = other.mapping_;
    mapping_length_ = other.mapping_length_;
    other.mapping_ = nullptr;
    other.bytes_ = {};
  }
  return *this;
}

ByteWindow::~ByteWindow() {
  if (mapping_ != nullptr) ::munmap(mapping_, mapping_length_);
}

absl::StatusOr<std::span<const uint8_t>> ByteSource::Read(size_t file, uint64_t offset, uint64_t length,
                                                          std::vector<uint8_t>& buffer) const {
  absl::StatusOr<ByteWindow> window = Window(file, offset, length);
  if (!window.ok()) return window.status();
  buffer.assign(window->bytes().begin(), window->bytes().end());
  return std::span<const uint8_t>(buffer.data(), buffer.size());
}

MappedFiles::MappedFiles(std::vector<std::string> paths)
    : paths_(std::move(paths)), descriptors_(paths_.size(), -1) {}

MappedFiles::~MappedFiles() {
  for (int fd : descriptors_) {
    if (fd >= 0) ::close(fd);
  }
}

absl::StatusOr<int> MappedFiles::Descriptor(size_t file) const {
  const std::string& path = paths_.at(file);
  std::lock_guard<std::mutex> lock(mutex_);
  if (descriptors_[file] >= 0) return descriptors_[file];
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused as not a regular file).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return absl::NotFoundError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  descriptors_[file] = fd;
  return fd;
}

namespace {

absl::Status Shorter(const std::string& path, uint64_t size, uint64_t offset, uint64_t length) {
  return absl::DataLossError(fmt::format("{}: the file is {} bytes now, shorter than when its header was read "
                                         "(bytes {}..{} wanted)",
                                         path, size, offset, offset + length));
}

}  // namespace

absl::StatusOr<std::span<const uint8_t>> MappedFiles::Read(size_t file, uint64_t offset, uint64_t length,
                                                           std::vector<uint8_t>& buffer) const {
  if (length == 0) return std::span<const uint8_t>();
  const absl::StatusOr<int> fd = Descriptor(file);
  if (!fd.ok()) return fd.status();
  const std::string& path = paths_[file];
  struct stat status {};
  const bool stat_ok = ::fstat(*fd, &status) == 0;
  if (!stat_ok || !S_ISREG(status.st_mode) || uint64_t(status.st_size) < offset + length) {
    return Shorter(path, stat_ok ? uint64_t(status.st_size) : 0, offset, length);
  }
  if (buffer.size() < length) buffer.resize(size_t(length));
  uint64_t done = 0;
  while (done < length) {
    const ssize_t got = ::pread(*fd, buffer.data() + done, size_t(length - done), off_t(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      return absl::DataLossError(fmt::format("{}: cannot read bytes {}..{}: {}", path, offset + done, offset + length,
                                             std::strerror(errno)));
    }
    if (got == 0) return Shorter(path, offset + done, offset, length);  // shrunk since the fstat
    done += uint64_t(got);
  }
  return std::span<const uint8_t>(buffer.data(), size_t(length));
}

absl::StatusOr<ByteWindow> MappedFiles::Window(size_t file, uint64_t offset, uint64_t length) const {
  const std::string& path = paths_.at(file);
  if (length == 0) return ByteWindow();
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused as not a regular file).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return absl::NotFoundError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  struct stat status {};
  const bool stat_ok = ::fstat(fd, &status) == 0;
  if (!stat_ok || !S_ISREG(status.st_mode) || uint64_t(status.st_size) < offset + length) {
    ::close(fd);
    // A mapping past the end would fault (SIGBUS) instead of failing here.
    return Shorter(path, stat_ok ? uint64_t(status.st_size) : 0, offset, length);
  }
  static const uint64_t page = uint64_t(::sysconf(_SC_PAGESIZE));
  const uint64_t start = offset / page * page;
  const size_t mapping_length = size_t(offset + length - start);
  void* mapping = ::mmap(nullptr, mapping_length, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, off_t(start));
  const int map_errno = errno;
  ::close(fd);
  if (mapping == MAP_FAILED) {
    return absl::InternalError(fmt::format("{}: cannot map bytes {}..{}: {}", path, offset, offset + length,
                                           std::strerror(map_errno)));
  }
  const auto* base = static_cast<const uint8_t*>(mapping) + (offset - start);
  return ByteWindow(std::span<const uint8_t>(base, size_t(length)), mapping, mapping_length);
}

absl::StatusOr<std::span<const uint8_t>> MemoryFiles::Read(size_t file, uint64_t offset, uint64_t length,
                                                           std::vector<uint8_t>& /*buffer*/) const {
  absl::StatusOr<ByteWindow> window = Window(file, offset, length);  // in place: no copy
  if (!window.ok()) return window.status();
  return window->bytes();
}

absl::StatusOr<ByteWindow> MemoryFiles::Window(size_t file, uint64_t offset, uint64_t length) const {
  const std::span<const uint8_t> bytes = files_.at(file);
  if (offset > bytes.size() || length > bytes.size() - offset) {
    return absl::OutOfRangeError(fmt::format("bytes {}..{} of a {}-byte buffer", offset, offset + length, bytes.size()));
  }
  return ByteWindow(bytes.subspan(size_t(offset), size_t(length)), nullptr, 0);
}

}  // namespace mxdiff::checkpoint
