#include "tools/audit/scale_scan.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "fmt/core.h"
#include "tools/audit/byte_histogram.h"
#include "tools/audit/strict_json.h"

namespace mxdiff::audit {
namespace {

struct Chunk {
  size_t scale;     // into plan.scales
  uint64_t offset;  // within the tensor's bytes
  uint64_t length;
};

// fn(i) for i in [0, count) on `threads` threads taking items in order; the calling thread
// only reports progress meanwhile. One thread: all on the calling thread (no thread to start,
// which the fuzz target runs thousands of times a second).
void ParallelFor(size_t count, int threads, const std::function<void(size_t)>& fn, const std::function<void()>& tick) {
  if (threads <= 1) {
    auto last = std::chrono::steady_clock::now();
    for (size_t i = 0; i < count; ++i) {
      fn(i);
      if (tick && std::chrono::steady_clock::now() - last > std::chrono::milliseconds(100)) {
        tick();
        last = std::chrono::steady_clock::now();
      }
    }
    return;
  }
  std::atomic<size_t> next{0};
  std::mutex mutex;
  std::condition_variable done;
  int running = threads;
  std::vector<std::thread> workers;
  workers.reserve(size_t(threads));
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      for (size_t i = next++; i < count; i = next++) fn(i);
      std::lock_guard<std::mutex> lock(mutex);
      if (--running == 0) done.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> lock(mutex);
    while (!done.wait_for(lock, std::chrono::milliseconds(100), [&] { return running == 0; })) {
      lock.unlock();
      if (tick) tick();
      lock.lock();
    }
  }
  for (std::thread& worker : workers) worker.join();
}

}  // namespace

ScaleHistogram TensorScan::Dense() const {
  ScaleHistogram dense{};
  for (const auto& [raw, count] : histogram) dense[raw] = count;
  return dense;
}

ScanResult ScanScales(const Checkpoint& checkpoint, const AuditPlan& plan, const ByteSource& source,
                      const ScanOptions& options) {
  ScanResult result;
  result.tensors.resize(plan.scales.size());
  const int threads = options.threads > 0 ? options.threads : int(std::max(1u, std::thread::hardware_concurrency()));
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
  auto window_of = [&](size_t s, uint64_t offset, uint64_t length) {
    const ScaleTensor& scale = plan.scales[s];
    const CheckpointFile& file = checkpoint.files[scale.ref.file];
    const TensorInfo& tensor = checkpoint.tensor(scale.ref);
    return source.Window(scale.ref.file, file.header.data_start + tensor.begin + offset, length);
  };
  const std::function<void()> tick = [&] {
    if (options.progress) options.progress(done_bytes.load(), total);
  };

  // Pass 1: histograms.
  ParallelFor(
      chunks.size(), threads,
      [&](size_t c) {
        const Chunk& chunk = chunks[c];
        ScaleHistogram counts{};
        absl::StatusOr<ByteWindow> window = window_of(chunk.scale, chunk.offset, chunk.length);
        if (window.ok()) CountBytes(window->bytes(), counts);
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
      [&](size_t i) {
        const size_t s = refused_tensors[i];
        TensorScan& scan = result.tensors[s];
        uint64_t refused = 0;
        std::vector<RefusedScale> first;
        for (uint64_t offset = 0; offset < scan.bytes; offset += chunk_bytes) {
          absl::StatusOr<ByteWindow> window = window_of(s, offset, std::min(chunk_bytes, scan.bytes - offset));
          if (!window.ok()) {
            std::lock_guard<std::mutex> lock(mutex);
            fail(s, window.status());
            scan.scanned = false;
            return;
          }
          const LayerAdmission verdict = AdmitLayer(window->bytes(), options.max_positions - first.size());
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
