// Test helper: `mxdiff audit ARGS` run as users run it, its exit status, stdout and stderr. The
// child runs from an argument vector (tools/cli/child_process.h), never through a shell.
#pragma once

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tools/cli/child_process.h"

namespace mxdiff::checkpoint::testing {

struct CliRun {
  int status = -1;
  std::string out;
  std::string err;
};

inline CliRun RunAuditCli(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {MXDIFF_BINARY, "audit"};
  argv.insert(argv.end(), args.begin(), args.end());
  const absl::StatusOr<cli::ChildRun> child = cli::RunChild(argv);
  CliRun run;
  if (!child.ok()) {
    ADD_FAILURE() << child.status();
    return run;
  }
  EXPECT_EQ(child->signal, 0) << "mxdiff audit was killed by signal " << child->signal << ": " << child->err;
  return {.status = child->exit_status, .out = child->out, .err = child->err};
}

// `words`: arguments separated by spaces; '...' groups (a space or nothing inside stays one
// argument, '' is an empty one), and nothing else a shell does happens (no $, *, \ or ;).
inline CliRun RunAuditCli(const std::string& words) {
  std::vector<std::string> args;
  std::string word;
  bool in_word = false, quoted = false;
  for (const char c : words) {
    if (c == '\'') {
      quoted = !quoted;
      in_word = true;
    } else if (c == ' ' && !quoted) {
      if (in_word) args.push_back(word);
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (quoted) ADD_FAILURE() << "RunAuditCli: an unclosed ' in: " << words;
  if (in_word) args.push_back(word);
  return RunAuditCli(args);
}

}  // namespace mxdiff::checkpoint::testing
