// Strict command lines for mxdiff's programs (mxdiff, repro). Abseil's own parser exits 1 (the
// finding code) on a bad flag and on --help, and accepts every flag linked into the binary, so
// these programs split argv here and set their ABSL_FLAGs through Abseil's reflection: a flag the
// program (or the command) does not take, a malformed value, a missing value are errors the
// caller turns into exit status 2, and --help lists exactly the flags that are taken.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mxdiff::cli {

struct CommandLine {
  std::vector<std::string> positional;
  std::vector<std::pair<std::string, std::string>> flags;  // name, value ("true"/"false" for bare bools)
  bool help = false;                                       // --help, -h, --helpfull, --help=...
};

// Syntax only: "--name=value", "--name value" (flags that are not bool), "--name" and "--noname"
// (bool flags); one dash works as two; "--" ends the flags; "-" alone is positional. A name that
// no linked ABSL_FLAG has is an InvalidArgument error naming it, as is a value-taking flag at
// the end of the line.
absl::StatusOr<CommandLine> SplitCommandLine(int argc, char** argv);

// Sets the flags of `line`; each must be one of `accepted` (InvalidArgument otherwise, and for a
// value the flag's type rejects: "--show=x: ..."). `owner` names the program in messages.
absl::Status ApplyFlags(const CommandLine& line, std::span<const std::string_view> accepted, std::string_view owner);

// A command's own help text for a flag another command defines (`mxdiff gate --arms` takes
// other values than `mxdiff bench --arms`).
struct OwnFlagHelp {
  std::string_view flag;
  std::string_view help;
};

// One line per accepted flag: "  --name=VALUE  help (default: x)"; a bool flag as "--[no]name".
// `strip_prefix` is removed from the start of each help text ("vectors: "); a flag in `own` shows
// that text instead of its definition's.
std::string FlagsHelp(std::span<const std::string_view> accepted, std::string_view strip_prefix = "",
                      std::span<const OwnFlagHelp> own = {});

// The accepted flags no ABSL_FLAG of the binary defines (a programming error a test catches).
std::vector<std::string> UndefinedFlags(std::span<const std::string_view> accepted);

}  // namespace mxdiff::cli
