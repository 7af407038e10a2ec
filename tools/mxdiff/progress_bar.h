// The scan's progress on stderr, only when stderr is a terminal (quiet in pipes, logs and CI).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>

namespace mxdiff::cli {

class ProgressBar {
 public:
  // Draws on `stream` only if it is a terminal (or `force`, for tests).
  explicit ProgressBar(std::FILE* stream, bool force = false);
  ~ProgressBar();  // clears the line it drew

  bool active() const { return active_; }
  void Update(uint64_t done_bytes, uint64_t total_bytes);

 private:
  std::FILE* stream_;
  bool active_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace mxdiff::cli
