// The arm interface of `mxdiff bench`'s protocols: a timed arm that can also run one weight set,
// warm up and prepare its timing (capture a graph). CUDA-free, so the protocols' order of steps
// is tested on the CPU with fake arms; the GPU arms are device_arms.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/bench/experiment.h"

namespace mxdiff::bench {

class BenchArm : public TimedArm {
 public:
  virtual std::string label() const = 0;
  // What ran at the last RunSet or capture: "folded 8x128x64/s16/w0 (folded-admitted)".
  virtual std::string route() const = 0;
  // Runs set `index` once, output poisoned first, and returns its bits (the first use of a
  // runner's kernels and workspace happens here). An unwritten element is an error.
  virtual absl::StatusOr<std::vector<uint16_t>> RunSet(int index) = 0;
  // `passes` runs over every set, untimed.
  virtual absl::Status WarmUp(int passes) = 0;
  // Graph arms: capture (cudaStreamCaptureMode `capture_mode`: 0 global, 1 thread-local,
  // 2 relaxed), instantiate, and with `launch_once` one untimed replay. Host arms: nothing.
  virtual absl::Status PrepareTiming(int capture_mode, bool launch_once) = 0;
  // The output after the last replay, and which set its last call ran.
  virtual absl::StatusOr<std::vector<uint16_t>> LastOutput() = 0;
  virtual int last_set() const = 0;
};

}  // namespace mxdiff::bench
