// Input files that cannot hang a tool: opening a FIFO blocks until a writer comes (forever, for a
// FIFO nobody writes), so mxdiff's commands and repro refuse a FIFO or a socket before they open
// it, as `mxdiff audit` refuses every file that is not regular. (A character device such as
// /dev/zero opens at once; the readers bound what they read from it.)
#pragma once

#include <string>

#include "absl/status/status.h"

namespace mxdiff::cli {

// InvalidArgument "<path>: not a regular file (a FIFO)" (or "a socket"); OK for anything else,
// a missing file included (the caller's open reports that).
absl::Status RefuseStreamInput(const std::string& path);

}  // namespace mxdiff::cli
