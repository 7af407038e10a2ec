#include "tools/cli/checked_output.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <system_error>

#include "fmt/format.h"
#include "reference/exit_status.h"

namespace mxdiff::cli {
namespace {

int WriteFailed(std::string_view program, const std::string& reason) {
  std::clearerr(stderr);
  fmt::print(stderr, "{}: cannot write the output to stdout: {}\n", program, reason);
  return kExitBadInput;
}

}  // namespace

int RunWithCheckedOutput(std::string_view program, const std::function<int()>& body) {
  int status = kExitOk;
  try {
    status = body();
  } catch (const std::system_error& error) {
    // fmt::print throws std::system_error when fwrite fails; so do other things (std::filesystem),
    // which are not write errors: only a stream whose error flag is set is one.
    if (std::ferror(stdout)) return WriteFailed(program, error.code().message());
    if (std::ferror(stderr)) return kExitBadInput;  // a message that cannot be written: nothing more can be said
    throw;
  }
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    return WriteFailed(program, errno != 0 ? std::strerror(errno) : "write error");
  }
  return status;
}

}  // namespace mxdiff::cli
