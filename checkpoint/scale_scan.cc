#include "checkpoint/scale_scan.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>

#include "fmt/core.h"
#include "checkpoint/byte_histogram.h"
#include "checkpoint/strict_json.h"

namespace mxdiff::audit {
namespace {

struct Chunk {
  size_t scale;     // into plan.scales
  uint64_t offset;  // within the tensor's bytes
  uint64_t length;
};

// fn(i, worker) for i in [0, count) on `threads` threads (worker 0..threads-1) taking items in
// order; the calling thread is worker 0 and reports progress between its items. One thread (or
// one item): all on the calling thread, no thread to start (the fuzz target runs thousands of
// audits a second).
void ParallelFor(size_t count, int threads, const std::function<void(size_t, int)>& fn,
                 const std::function<void()>& tick) {
  threads = int(std::min<size_t>(size_t(std::max(threads, 1)), std::max<size_t>(count, 1)));
  std::atomic<size_t> next{0};
  auto work = [&](int worker) {
    auto last = std::chrono::steady_clock::now();
    for (size_t i = next++; i < count; i = next++) {
      fn(i, worker);
      if (worker == 0 && tick && std::chrono::steady_clock::now() - last > std::chrono::milliseconds(100)) {
        tick();
        last = std::chrono::steady_clock::now();
      }
    }
  };
  std::vector<std::thread> workers;
  workers.reserve(size_t(threads - 1));
  for (int t = 1; t < threads; ++t) workers.emplace_back(work, t);
  work(0);
  for (std::thread& worker : workers) worker.join();
}

}  // namespace

ScaleHistogram TensorScan::Dense() const {
  ScaleHistogram dense{};
  for (const auto& [raw, count] : histogram) dense[raw] = count;
  return dense;
}

int DefaultScanThreads(uint64_t scale_bytes) {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  const int allowed = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 0;
  const int usable = allowed > 0 ? allowed : int(std::max(1u, std::thread::hardware_concurrency()));
  const uint64_t by_work = std::max<uint64_t>(1, scale_bytes / kScanBytesPerThread);
  return int(std::min<uint64_t>(uint64_t(usable), by_work));
}

ScanResult ScanScales(const Checkpoint& checkpoint, const AuditPlan& plan, const ByteSource& source,
                      const ScanOptions& options) {
  ScanResult result;
  result.tensors.resize(plan.scales.size());
  const uint64_t chunk_bytes = std::max<uint64_t>(options.chunk_bytes, 4096);

  std::vector<Chunk> chunks;
  std::vector<size_t> chunks_left(plan.scales.size(), 0);
  uint64_t total = 0;
  for (size_t s = 0; s < plan.scales.size(); ++s) {
    const uint64_t size = checkpoint.tensor(plan.scales[s].ref).byte_size();
    result.tensors[s].bytes = size;
    total += size;
    uint64_t offset = 0;
    do {
      chunks.push_back({s, offset, std::min(chunk_bytes, size - offset)});
      ++chunks_left[s];
      offset += chunk_bytes;
    } while (offset < size);
  }

  std::mutex mutex;  // guards everything below but the atomic
  std::vector<std::unique_ptr<ScaleHistogram>> pending(plan.scales.size());  // tensors in flight only
  std::vector<bool> failed(plan.scales.size(), false);
  std::atomic<uint64_t> done_bytes{0};
  auto fail = [&](size_t s, const absl::Status& status) {
    const ScaleTensor& scale = plan.scales[s];
    const std::string& path = checkpoint.files[scale.ref.file].path;
    if (!failed[s]) result.errors.push_back({path, scale.name, fmt::format("{}: tensor {}: {}", path, Quoted(scale.name), std::string(status.message()))});
    failed[s] = true;
  };
  const int threads = options.threads > 0 ? options.threads : DefaultScanThreads(total);
  // Each worker reads into a buffer of its own (ByteSource::Read: pread, no mapping).
  std::vector<std::vector<uint8_t>> buffers(size_t(std::max(threads, 1)));
  auto read = [&](size_t s, uint64_t offset, uint64_t length, int worker) {
    const ScaleTensor& scale = plan.scales[s];
    const CheckpointFile& file = checkpoint.files[scale.ref.file];
    const TensorInfo& tensor = checkpoint.tensor(scale.ref);
    return source.Read(scale.ref.file, file.header.data_start + tensor.begin + offset, length,
                       buffers[size_t(worker)]);
  };
  const std::function<void()> tick = [&] {
    if (options.progress) options.progress(done_bytes.load(), total);
  };

  // Pass 1: histograms.
  ParallelFor(
      chunks.size(), threads,
      [&](size_t c, int worker) {
        const Chunk& chunk = chunks[c];
        ScaleHistogram counts{};
        const absl::StatusOr<std::span<const uint8_t>> window = read(chunk.scale, chunk.offset, chunk.length, worker);
        if (window.ok()) CountBytes(*window, counts);
        done_bytes += chunk.length;
        std::lock_guard<std::mutex> lock(mutex);
        if (!window.ok()) fail(chunk.scale, window.status());
        std::unique_ptr<ScaleHistogram>& sum = pending[chunk.scale];
        if (sum == nullptr) sum = std::make_unique<ScaleHistogram>();
        for (int raw = 0; raw < 256; ++raw) (*sum)[raw] += counts[raw];
        if (--chunks_left[chunk.scale] > 0) return;
        TensorScan& scan = result.tensors[chunk.scale];
        if (!failed[chunk.scale]) {
          scan.scanned = true;
          for (int raw = 0; raw < 256; ++raw) {
            if ((*sum)[raw] != 0) scan.histogram.emplace_back(uint8_t(raw), (*sum)[raw]);
          }
          scan.refused = RefusedCount(*sum);
        }
        sum.reset();
      },
      tick);
  if (options.progress) options.progress(done_bytes.load(), total);

  // Pass 2: positions of the refused bytes, by the reference's AdmitLayer, whose count must
  // equal the histogram's.
  std::vector<size_t> refused_tensors;
  for (size_t s = 0; s < plan.scales.size(); ++s) {
    if (result.tensors[s].scanned && result.tensors[s].refused > 0) refused_tensors.push_back(s);
  }
  ParallelFor(
      refused_tensors.size(), threads,
      [&](size_t i, int worker) {
        const size_t s = refused_tensors[i];
        TensorScan& scan = result.tensors[s];
        uint64_t refused = 0;
        std::vector<RefusedScale> first;
        for (uint64_t offset = 0; offset < scan.bytes; offset += chunk_bytes) {
          const absl::StatusOr<std::span<const uint8_t>> window =
              read(s, offset, std::min(chunk_bytes, scan.bytes - offset), worker);
          if (!window.ok()) {
            std::lock_guard<std::mutex> lock(mutex);
            fail(s, window.status());
            scan.scanned = false;
            return;
          }
          const LayerAdmission verdict = AdmitLayer(*window, options.max_positions - first.size());
          refused += verdict.refused_count;
          for (const RefusedScale& r : verdict.refused) first.push_back({r.index + size_t(offset), r.raw});
        }
        std::lock_guard<std::mutex> lock(mutex);
        if (refused != scan.refused) {
          fail(s, absl::InternalError(fmt::format("the histogram counts {} refused bytes, AdmitLayer {}: an audit bug",
                                                  scan.refused, refused)));
          scan.scanned = false;
          return;
        }
        scan.first_refused = std::move(first);
      },
      tick);
  return result;
}

}  // namespace mxdiff::audit
