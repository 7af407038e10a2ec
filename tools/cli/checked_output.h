// Output that counts: a program's stdout is its result, so a write that fails (a full disk,
// /dev/full, a closed pipe's EPIPE with SIGPIPE ignored) must not end in exit 0 with the result
// lost, nor in an abort. mxdiff and repro run their whole main through RunWithCheckedOutput.
#pragma once

#include <functional>
#include <string_view>

namespace mxdiff::cli {

// Runs `body` (it returns the program's exit status), then flushes stdout. A write to stdout that
// failed (fmt::print's std::system_error where the stream's error flag is set, or a failed final
// flush) makes the status 2, with one line on stderr: "<program>: cannot write the output to
// stdout: <reason>". A write to stderr that fails (fmt throws there at once: stderr is unbuffered)
// is exit 2 too, silently: there is nowhere left to say why. Other exceptions propagate unchanged.
int RunWithCheckedOutput(std::string_view program, const std::function<int()>& body);

}  // namespace mxdiff::cli
