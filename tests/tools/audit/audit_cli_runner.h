// Test helper: `mxdiff audit ARGS` run as users run it, its exit status, stdout and stderr.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "gtest/gtest.h"

namespace mxdiff::audit::testing {

struct CliRun {
  int status = -1;
  std::string out;
  std::string err;
};

// `args` go to a shell as they are (quote what needs it).
inline CliRun RunAuditCli(const std::string& args) {
  // One file per process and call: ctest runs these tests in parallel processes.
  static int calls = 0;
  const std::string err_file = ::testing::TempDir() + "/audit_cli_runner_stderr." + std::to_string(::getpid()) + "." +
                               std::to_string(calls++) + ".txt";
  const std::string command = std::string(MXDIFF_BINARY) + " audit " + args + " 2>" + err_file;
  CliRun run;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  std::array<char, 4096> buffer;
  size_t got;
  while ((got = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) run.out.append(buffer.data(), got);
  const int status = ::pclose(pipe);
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream stream(err_file);
  run.err.assign(std::istreambuf_iterator<char>(stream), std::istreambuf_iterator<char>());
  std::remove(err_file.c_str());
  return run;
}

}  // namespace mxdiff::audit::testing
