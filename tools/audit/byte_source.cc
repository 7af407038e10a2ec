#include "tools/audit/byte_source.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "fmt/core.h"

namespace mxdiff::audit {

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
    return absl::DataLossError(fmt::format("{}: the file is {} bytes now, shorter than when its header was read "
                                           "(bytes {}..{} wanted)",
                                           path, stat_ok ? uint64_t(status.st_size) : 0, offset, offset + length));
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

absl::StatusOr<ByteWindow> MemoryFiles::Window(size_t file, uint64_t offset, uint64_t length) const {
  const std::span<const uint8_t> bytes = files_.at(file);
  if (offset > bytes.size() || length > bytes.size() - offset) {
    return absl::OutOfRangeError(fmt::format("bytes {}..{} of a {}-byte buffer", offset, offset + length, bytes.size()));
  }
  return ByteWindow(bytes.subspan(size_t(offset), size_t(length)), nullptr, 0);
}

}  // namespace mxdiff::audit
