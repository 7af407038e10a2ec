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

namespace mxdiff::checkpoint {
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

namespace {

// One ScanScales call: its chunks and the state its workers share.
class ScaleScanner {
 public:
  ScaleScanner(const Checkpoint& checkpoint, const AuditPlan& plan, const ByteSource& source,
               const ScanOptions& options)
      : checkpoint_(checkpoint),
        plan_(plan),
        source_(source),
        options_(options),
        chunk_bytes_(std::max<uint64_t>(options.chunk_bytes, 4096)),
        chunks_left_(plan.scales.size(), 0),
        pending_(plan.scales.size()),
        failed_(plan.scales.size(), false) {
    result_.tensors.resize(plan.scales.size());
    SplitIntoChunks();
    threads_ = options.threads > 0 ? options.threads : DefaultScanThreads(total_);
    buffers_.resize(size_t(std::max(threads_, 1)));
  }

  ScanResult Run() {
    const std::function<void()> tick = [&] {
      if (options_.progress) options_.progress(done_bytes_.load(), total_);
    };
    // Pass 1: histograms.
    ParallelFor(
        chunks_.size(), threads_, [&](size_t c, int worker) { CountChunk(chunks_[c], worker); }, tick);
    if (options_.progress) options_.progress(done_bytes_.load(), total_);
    // Pass 2: positions of the refused bytes, by the reference's AdmitLayer, whose count must
    // equal the histogram's.
    std::vector<size_t> refused_tensors;
    for (size_t s = 0; s < plan_.scales.size(); ++s) {
      if (result_.tensors[s].scanned && result_.tensors[s].refused > 0) refused_tensors.push_back(s);
    }
    ParallelFor(
        refused_tensors.size(), threads_, [&](size_t i, int worker) { LocateRefused(refused_tensors[i], worker); },
        tick);
    return std::move(result_);
  }

 private:
  // Every scale tensor as chunks of chunk_bytes_ (one, maybe empty, at least).
  void SplitIntoChunks() {
    for (size_t s = 0; s < plan_.scales.size(); ++s) {
      const uint64_t size = checkpoint_.tensor(plan_.scales[s].ref).byte_size();
      result_.tensors[s].bytes = size;
      total_ += size;
      uint64_t offset = 0;
      do {
        chunks_.push_back({s, offset, std::min(chunk_bytes_, size - offset)});
        ++chunks_left_[s];
        offset += chunk_bytes_;
      } while (offset < size);
    }
  }

  // Each worker reads into a buffer of its own (ByteSource::Read: pread, no mapping).
  absl::StatusOr<std::span<const uint8_t>> Read(size_t s, uint64_t offset, uint64_t length, int worker) {
    const ScaleTensor& scale = plan_.scales[s];
    const CheckpointFile& file = checkpoint_.files[scale.ref.file];
    const TensorInfo& tensor = checkpoint_.tensor(scale.ref);
    return source_.Read(scale.ref.file, file.header.data_start + tensor.begin + offset, length,
                        buffers_[size_t(worker)]);
  }

  // Records the first error of tensor s. The mutex is held.
  void Fail(size_t s, const absl::Status& status) {
    const ScaleTensor& scale = plan_.scales[s];
    const std::string& path = checkpoint_.files[scale.ref.file].path;
    if (!failed_[s]) {
      result_.errors.push_back(
          {path, scale.name,
           fmt::format("{}: tensor {}: {}", path, Quoted(scale.name), std::string(status.message()))});
    }
    failed_[s] = true;
  }

  // Pass 1 for one chunk: its counts join the tensor's; the tensor's last chunk publishes them.
  void CountChunk(const Chunk& chunk, int worker) {
    ScaleHistogram counts{};
    const absl::StatusOr<std::span<const uint8_t>> window = Read(chunk.scale, chunk.offset, chunk.length, worker);
    if (window.ok()) CountBytes(*window, counts);
    done_bytes_ += chunk.length;
    std::lock_guard<std::mutex> lock(mutex_);
    if (!window.ok()) Fail(chunk.scale, window.status());
    std::unique_ptr<ScaleHistogram>& sum = pending_[chunk.scale];
    if (sum == nullptr) sum = std::make_unique<ScaleHistogram>();
    for (int raw = 0; raw < 256; ++raw) (*sum)[raw] += counts[raw];
    if (--chunks_left_[chunk.scale] > 0) return;
    TensorScan& scan = result_.tensors[chunk.scale];
    if (!failed_[chunk.scale]) {
      scan.scanned = true;
      for (int raw = 0; raw < 256; ++raw) {
        if ((*sum)[raw] != 0) scan.histogram.emplace_back(uint8_t(raw), (*sum)[raw]);
      }
      scan.refused = RefusedCount(*sum);
    }
    sum.reset();
  }

  // Pass 2 for one tensor with refused bytes: the positions of the first options_.max_positions.
  void LocateRefused(size_t s, int worker) {
    TensorScan& scan = result_.tensors[s];
    uint64_t refused = 0;
    std::vector<RefusedScale> first;
    for (uint64_t offset = 0; offset < scan.bytes; offset += chunk_bytes_) {
      const absl::StatusOr<std::span<const uint8_t>> window =
          Read(s, offset, std::min(chunk_bytes_, scan.bytes - offset), worker);
      if (!window.ok()) {
        std::lock_guard<std::mutex> lock(mutex_);
        Fail(s, window.status());
        scan.scanned = false;
        return;
      }
      const LayerAdmission verdict = AdmitLayer(*window, options_.max_positions - first.size());
      refused += verdict.refused_count;
      for (const RefusedScale& r : verdict.refused) first.push_back({r.index + size_t(offset), r.raw});
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (refused != scan.refused) {
      Fail(s, absl::InternalError(fmt::format("the histogram counts {} refused bytes, AdmitLayer {}: an audit bug",
                                              scan.refused, refused)));
      scan.scanned = false;
      return;
    }
    scan.first_refused = std::move(first);
  }

  const Checkpoint& checkpoint_;
  const AuditPlan& plan_;
  const ByteSource& source_;
  const ScanOptions& options_;
  const uint64_t chunk_bytes_;
  ScanResult result_;
  std::vector<Chunk> chunks_;
  uint64_t total_ = 0;
  int threads_ = 1;
  std::vector<std::vector<uint8_t>> buffers_;  // one per worker
  std::mutex mutex_;                           // guards everything below but the atomic
  std::vector<size_t> chunks_left_;
  std::vector<std::unique_ptr<ScaleHistogram>> pending_;  // tensors in flight only
  std::vector<bool> failed_;
  std::atomic<uint64_t> done_bytes_{0};
};

}  // namespace

ScanResult ScanScales(const Checkpoint& checkpoint, const AuditPlan& plan, const ByteSource& source,
                      const ScanOptions& options) {
  return ScaleScanner(checkpoint, plan, source, options).Run();
}

}  // namespace mxdiff::checkpoint
