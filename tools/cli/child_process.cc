#include "tools/cli/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

#include "fmt/format.h"

extern char** environ;

namespace mxdiff::cli {
namespace {

// A pipe whose ends are closed in the child unless dup2'ed onto its stdout or stderr.
struct Pipe {
  int read = -1, write = -1;
  ~Pipe() {
    if (read >= 0) ::close(read);
    if (write >= 0) ::close(write);
  }
};

absl::Status OpenPipe(Pipe& pipe) {
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC) != 0) return absl::ResourceExhaustedError(fmt::format("pipe: {}", std::strerror(errno)));
  pipe.read = ends[0];
  pipe.write = ends[1];
  return absl::OkStatus();
}

// Reads both pipes to their end (either may be -1), so that a child filling one never blocks.
void Drain(int out_fd, int err_fd, ChildRun& run) {
  std::array<pollfd, 2> fds{pollfd{out_fd, POLLIN, 0}, pollfd{err_fd, POLLIN, 0}};
  std::array<std::string*, 2> into{&run.out, &run.err};
  std::array<char, 8192> buffer;
  while (fds[0].fd >= 0 || fds[1].fd >= 0) {
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t got = ::read(fds[i].fd, buffer.data(), buffer.size());
      if (got > 0) into[i]->append(buffer.data(), size_t(got));
      else if (got == 0 || errno != EINTR) fds[i].fd = -1;
    }
  }
}

}  // namespace

absl::StatusOr<ChildRun> RunChild(std::span<const std::string> argv, ChildStderr stderr_to) {
  if (argv.empty()) return absl::InvalidArgumentError("RunChild: no program");
  Pipe out, err;
  if (absl::Status s = OpenPipe(out); !s.ok()) return s;
  if (stderr_to == ChildStderr::kSeparate) {
    if (absl::Status s = OpenPipe(err); !s.ok()) return s;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out.write, STDOUT_FILENO);
  switch (stderr_to) {
    case ChildStderr::kSeparate: posix_spawn_file_actions_adddup2(&actions, err.write, STDERR_FILENO); break;
    case ChildStderr::kMerged: posix_spawn_file_actions_adddup2(&actions, out.write, STDERR_FILENO); break;
    case ChildStderr::kDiscarded:
      posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
      break;
  }
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return absl::NotFoundError(fmt::format("cannot run {}: {}", argv[0], std::strerror(spawned)));
  // Our copies of the write ends go, so that the reads end when the child's do.
  ::close(out.write);
  out.write = -1;
  if (err.write >= 0) {
    ::close(err.write);
    err.write = -1;
  }
  ChildRun run;
  Drain(out.read, err.read, run);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return absl::InternalError(fmt::format("waitpid for {}: {}", argv[0], std::strerror(errno)));
  }
  if (WIFEXITED(status)) run.exit_status = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) run.signal = WTERMSIG(status);
  return run;
}

}  // namespace mxdiff::cli
