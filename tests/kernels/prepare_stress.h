// The stress that shows whether a layer's weights have landed before the kernels read them: a new
// layer per round (fresh random weights, a real decode shape or a small one), launched right
// after Prepare returns, back to back on several streams, each launch compared with the
// reference. Optional in-process load (large host->device and device->device copies on their own
// streams) keeps the copy engines busy, as other processes on the GPU do. Run several processes
// of `prepare_stress` at once for the cross-process case (tools/gpu/run_gpu_suite.sh does).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/gemm_runner.h"

namespace mxdiff::testing {

struct PrepareStressOptions {
  uint64_t seed = 0;
  int streams = 4;
  int launches_per_stream = 2;
  int rounds = 16;         // at least this many rounds,
  double seconds = 0;      // and for at least this long
  int load_threads = 0;    // threads copying in the background
};

struct PrepareStressReport {
  int rounds = 0;
  int launches = 0;
  int mismatched_launches = 0;
  std::string first_mismatch;  // round, shape, tactic, stream, launch and the first elements
};

absl::StatusOr<PrepareStressReport> RunPrepareStress(GemmRunner& runner, const PrepareStressOptions& options);

}  // namespace mxdiff::testing
