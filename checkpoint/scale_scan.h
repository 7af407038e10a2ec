// Reads the selected scale tensors' bytes, and only those, and counts them: per tensor a
// histogram (from which min, max, NaN bytes, refused bytes and MX-spec deviations follow) and,
// for a tensor with refused bytes, their first positions. Work is cut into chunks of at most
// chunk_bytes that `threads` threads take in order, each mapping one chunk at a time: memory is
// bounded by threads x chunk_bytes plus a small record per tensor, independent of the
// checkpoint's size.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "reference/admission.h"
#include "checkpoint/byte_source.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/scale_plan.h"

namespace mxdiff::checkpoint {

struct TensorScan {
  bool scanned = false;                                  // false: an error kept it from being read
  std::vector<std::pair<uint8_t, uint64_t>> histogram;  // the non-zero bins, ascending raw
  uint64_t bytes = 0;
  // Bytes outside the admitted set: RefusedCount of the histogram, and for a tensor with any,
  // AdmitLayer's count over its bytes too (the scan fails if the two disagree).
  uint64_t refused = 0;
  std::vector<RefusedScale> first_refused;  // the first max_positions, index into the tensor

  ScaleHistogram Dense() const;
};

// The threads a scan takes by default (ScanOptions::threads 0) for `scale_bytes` of work: one
// per CPU the process may run on (its affinity mask, which a container or taskset narrows, not
// the machine's count), and no more than one per kScanBytesPerThread of scale bytes, since a
// thread reads (pread, page cache) and counts at several GB/s: a small audit is done on the
// calling thread before another thread would have started.
inline constexpr uint64_t kScanBytesPerThread = uint64_t(64) << 20;
int DefaultScanThreads(uint64_t scale_bytes);

struct ScanOptions {
  int threads = 0;  // 0: DefaultScanThreads
  uint64_t chunk_bytes = uint64_t(8) << 20;
  size_t max_positions = 16;
  // Called on the calling thread about ten times a second while the scan runs.
  std::function<void(uint64_t done_bytes, uint64_t total_bytes)> progress;
};

struct ScanResult {
  std::vector<TensorScan> tensors;  // one per plan.scales entry
  std::vector<AuditError> errors;
};

ScanResult ScanScales(const Checkpoint& checkpoint, const AuditPlan& plan, const ByteSource& source,
                      const ScanOptions& options);

}  // namespace mxdiff::checkpoint
