#include "tools/cli/input_file.h"

#include <sys/stat.h>

#include "fmt/format.h"

namespace mxdiff::cli {

absl::Status RefuseStreamInput(const std::string& path) {
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0) return absl::OkStatus();  // stat does not open: no wait
  if (S_ISFIFO(status.st_mode)) {
    return absl::InvalidArgumentError(fmt::format("{}: not a regular file (a FIFO)", path));
  }
  if (S_ISSOCK(status.st_mode)) {
    return absl::InvalidArgumentError(fmt::format("{}: not a regular file (a socket)", path));
  }
  return absl::OkStatus();
}

}  // namespace mxdiff::cli
