// How fast `mxdiff audit` reads scale bytes from the page cache, and how much memory it takes
// (issue 8, item 6). The checkpoint is generated with DeepSeek V4-Flash's shapes and so its real
// ratio of scale to weight bytes (1 scale byte per 16 packed code bytes): per layer 16 routed
// experts, w1/w3 [2048, 4096/2] I8 codes with [2048, 128] F8_E8M0 scales, w2 [4096, 2048/2]
// with [4096, 64], one shard file per layer. Only the scale bytes are written; the weights are
// holes of a sparse file, which the audit never reads (that is the point), so the files have
// their real sizes and offsets without costing the disk. Scale bytes are raw 114..126, as the
// seed's audit of the real checkpoint found. The files are read once before timing (page cache).
//
//   build/tests/checkpoint/audit_benchmark [--benchmark_filter=...]
//
// BM_AuditOneFileManyTensors (argument: tensors in one file) times a header-bound audit.
// BM_AuditLargeShard (argument: threads, 0 the default) one 3.2 GB shard of a whole V4 layer.
// BM_AuditScaleBytes arguments: threads, MiB of scale bytes. Counters: scale_bytes/s (the claim: >= 2 GB/s on the
// 2-core machine with both cores), peak_rss_MiB (VmHWM of the process during the audits, reset
// before each benchmark: it must not grow with the checkpoint). MXDIFF_AUDIT_BENCH_DIR picks the
// folder (default: the temporary folder); the files are removed at exit.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "fmt/core.h"
#include "nlohmann/json.hpp"
#include "checkpoint/audit.h"

namespace mxdiff::checkpoint {
namespace {

namespace fs = std::filesystem;

constexpr int kExperts = 16;
constexpr uint64_t kHidden = 4096, kInter = 2048;

fs::path BenchDir() {
  const char* env = std::getenv("MXDIFF_AUDIT_BENCH_DIR");
  return env != nullptr ? fs::path(env) : fs::temp_directory_path() / fmt::format("mxdiff_audit_bench_{}", ::getpid());
}

void RemoveBenchDirAtExit() {
  static const bool registered = [] {
    std::atexit([] { fs::remove_all(BenchDir()); });
    return true;
  }();
  (void)registered;
}

// One layer's shard: the header, scale bytes written, weights left as holes.
void WriteLayer(const fs::path& path, int layer, std::mt19937_64& rng, int experts = kExperts) {
  struct Tensor {
    std::string name;
    std::string dtype;
    std::vector<uint64_t> shape;
    uint64_t bytes;
  };
  std::vector<Tensor> tensors;
  for (int e = 0; e < experts; ++e) {
    for (const auto& [w, n, k] : {std::tuple{"w1", kInter, kHidden}, std::tuple{"w2", kHidden, kInter},
                                  std::tuple{"w3", kInter, kHidden}}) {
      const std::string base = fmt::format("layers.{}.ffn.experts.{}.{}", layer, e, w);
      tensors.push_back({base + ".weight", "I8", {n, k / 2}, n * k / 2});
      tensors.push_back({base + ".scale", "F8_E8M0", {n, k / 32}, n * k / 32});
    }
  }
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const Tensor& t : tensors) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes}}};
    offset += t.bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
  if (fd < 0) std::abort();
  uint8_t prefix[8];
  for (int i = 0; i < 8; ++i) prefix[i] = uint8_t(uint64_t(text.size()) >> (8 * i));
  const uint64_t data_start = 8 + text.size();
  if (::pwrite(fd, prefix, 8, 0) != 8 || ::pwrite(fd, text.data(), text.size(), 8) != ssize_t(text.size())) std::abort();
  std::vector<uint8_t> scales;
  offset = 0;
  for (const Tensor& t : tensors) {
    if (t.dtype == "F8_E8M0") {
      scales.resize(t.bytes);
      // Centred on 120, within 114..126: the sum of three small uniforms.
      for (uint8_t& b : scales) {
        const uint64_t r = rng();
        b = uint8_t(114 + (r & 3) + ((r >> 8) % 5) + ((r >> 16) % 5));
      }
      if (::pwrite(fd, scales.data(), scales.size(), off_t(data_start + offset)) != ssize_t(scales.size())) std::abort();
    }
    offset += t.bytes;
  }
  if (::ftruncate(fd, off_t(data_start + offset)) != 0) std::abort();
  ::close(fd);
}

struct Generated {
  std::vector<std::string> files;
  uint64_t scale_bytes = 0;
  uint64_t file_bytes = 0;
};

const Generated& Checkpoint(int scale_mib) {
  static std::map<int, Generated> generated;
  RemoveBenchDirAtExit();
  auto found = generated.find(scale_mib);
  if (found != generated.end()) return found->second;
  Generated checkpoint;
  const fs::path dir = BenchDir() / fmt::format("scales_{}MiB", scale_mib);
  fs::create_directories(dir);
  const uint64_t layer_scale_bytes = kExperts * (2 * kInter * kHidden / 32 + kHidden * kInter / 32);
  const int layers = int((uint64_t(scale_mib) << 20) / layer_scale_bytes);
  std::mt19937_64 rng(20261208);
  for (int layer = 0; layer < layers; ++layer) {
    const fs::path file = dir / fmt::format("model-{:05d}-of-{:05d}.safetensors", layer + 1, layers);
    WriteLayer(file, layer, rng);
    checkpoint.files.push_back(file.string());
    checkpoint.file_bytes += fs::file_size(file);
  }
  checkpoint.scale_bytes = uint64_t(layers) * layer_scale_bytes;
  // Into the page cache: one audit before any timing.
  AuditOptions options;
  const AuditResult warm = RunAudit(checkpoint.files, options);
  if (!warm.errors.empty() || ExitStatus(warm) != 0 || warm.plan.layers.size() != size_t(2 * layers)) std::abort();
  return generated.emplace(scale_mib, std::move(checkpoint)).first->second;
}

// VmHWM: the peak resident set since the last reset.
double PeakRssMiB() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return -1;
}

void ResetPeakRss() { std::ofstream("/proc/self/clear_refs") << "5"; }

// The timed loop of one case: audits `checkpoint` with `threads` scan threads (0: the default)
// each iteration, then sets the counters every case reports (rate, sizes, peak RSS).
void TimeAudits(benchmark::State& state, const Generated& checkpoint, int threads) {
  AuditOptions options;
  options.scan.threads = threads;
  ResetPeakRss();
  for (auto _ : state) {
    const AuditResult result = RunAudit(checkpoint.files, options);
    if (!result.errors.empty()) state.SkipWithError(result.errors[0].message.c_str());
    benchmark::DoNotOptimize(result.scan.tensors.data());
  }
  state.counters["scale_bytes/s"] = benchmark::Counter(double(checkpoint.scale_bytes), benchmark::Counter::kIsIterationInvariantRate,
                                                       benchmark::Counter::OneK::kIs1000);
  state.counters["checkpoint_GB"] = double(checkpoint.file_bytes) * 1e-9;
  state.counters["scale_GB"] = double(checkpoint.scale_bytes) * 1e-9;
  state.counters["peak_rss_MiB"] = PeakRssMiB();
}

void BM_AuditScaleBytes(benchmark::State& state) {
  const Generated& checkpoint = Checkpoint(int(state.range(1)));
  TimeAudits(state, checkpoint, int(state.range(0)));
  state.counters["files"] = double(checkpoint.files.size());
}

// Issue 23, item 16: one large shard as V4-Flash has them, a whole layer of 256 routed experts
// in one file: 3.2 GB, of which 201 MB (192 MiB) scale bytes in 768 tensors of 256 KiB between
// their weights. Argument: threads (0: the default). The three in one run, so that the default
// can be compared with the best thread count on the same machine at the same time.
constexpr int kLargeShardExperts = 256;

const Generated& LargeShard() {
  static const Generated generated = [] {
    RemoveBenchDirAtExit();
    Generated checkpoint;
    const fs::path dir = BenchDir() / "large_shard";
    fs::create_directories(dir);
    const fs::path file = dir / "model-00001-of-00001.safetensors";
    std::mt19937_64 rng(20261205);
    WriteLayer(file, 0, rng, kLargeShardExperts);
    checkpoint.files.push_back(file.string());
    checkpoint.file_bytes = fs::file_size(file);
    checkpoint.scale_bytes = kLargeShardExperts * (2 * kInter * kHidden / 32 + kHidden * kInter / 32);
    AuditOptions options;
    const AuditResult warm = RunAudit(checkpoint.files, options);  // into the page cache
    if (!warm.errors.empty() || ExitStatus(warm) != 0 || warm.plan.layers.size() != 2) std::abort();
    return checkpoint;
  }();
  return generated;
}

void BM_AuditLargeShard(benchmark::State& state) { TimeAudits(state, LargeShard(), int(state.range(0))); }

// The same three, interleaved: each iteration audits the shard with 1 thread, 2 threads and the
// default, in turn, and the counters are each one's median rate over the iterations. On a
// machine shared with other work (builds on both cores) the load changes from one second to
// the next; taking the three in turn, many times, compares them under the same load, where the
// separate cases above may each meet another.
void BM_AuditLargeShardInterleaved(benchmark::State& state) {
  const Generated& checkpoint = LargeShard();
  constexpr int kConfigs[] = {1, 2, 0};
  std::vector<double> seconds[3];
  for (auto _ : state) {
    for (int c = 0; c < 3; ++c) {
      AuditOptions options;
      options.scan.threads = kConfigs[c];
      const auto start = std::chrono::steady_clock::now();
      const AuditResult result = RunAudit(checkpoint.files, options);
      seconds[c].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      if (!result.errors.empty()) state.SkipWithError(result.errors[0].message.c_str());
      benchmark::DoNotOptimize(result.scan.tensors.data());
    }
  }
  const char* names[] = {"threads1_GB/s", "threads2_GB/s", "default_GB/s"};
  for (int c = 0; c < 3; ++c) {
    std::sort(seconds[c].begin(), seconds[c].end());
    const double median = seconds[c].empty() ? 0 : seconds[c][seconds[c].size() / 2];
    state.counters[names[c]] = median > 0 ? double(checkpoint.scale_bytes) * 1e-9 / median : 0;
  }
  state.counters["default_threads"] = double(DefaultScanThreads(checkpoint.scale_bytes));
}

// Issue 23, item 10: one file of many small tensors, where the header is the work (the scale
// bytes are a few KiB). Routed experts of 16 a layer, w1/w2/w3 [8, 16] I8 codes with [8, 1]
// F8_E8M0 scales, topped up to the exact count with F32 norms; the audit must stay linear in
// the header (the callback parser nlohmann offers for duplicate names was quadratic).
const std::string& ManyTensorFile(int tensors) {
  static std::map<int, std::string> written;
  RemoveBenchDirAtExit();
  if (auto found = written.find(tensors); found != written.end()) return found->second;
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  auto add = [&](const std::string& name, const char* dtype, std::vector<uint64_t> shape, uint64_t bytes) {
    header[name] = {{"dtype", dtype}, {"shape", std::move(shape)}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  };
  constexpr int kPerLayer = kExperts * 6;
  for (int t = 0; t + kPerLayer <= tensors; t += kPerLayer) {
    for (int e = 0; e < kExperts; ++e) {
      for (const char* w : {"w1", "w2", "w3"}) {
        const std::string base = fmt::format("layers.{}.ffn.experts.{}.{}", t / kPerLayer, e, w);
        add(base + ".weight", "I8", {8, 16}, 128);
        add(base + ".scale", "F8_E8M0", {8, 1}, 8);
      }
    }
  }
  for (int t = tensors / kPerLayer * kPerLayer; t < tensors; ++t) add(fmt::format("norms.{}.weight", t), "F32", {4}, 16);
  const std::string text = header.dump();
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[size_t(i)] = char(uint8_t(uint64_t(text.size()) >> (8 * i)));
  bytes += text;
  bytes.append(size_t(offset), char(120));
  const fs::path dir = BenchDir();
  fs::create_directories(dir);
  const fs::path path = dir / fmt::format("tensors_{}.safetensors", tensors);
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
  return written.emplace(tensors, path.string()).first->second;
}

void BM_AuditOneFileManyTensors(benchmark::State& state) {
  const int tensors = int(state.range(0));
  const std::vector<std::string> files = {ManyTensorFile(tensors)};
  AuditOptions options;
  options.scan.threads = 1;
  for (auto _ : state) {
    const AuditResult result = RunAudit(files, options);
    if (!result.errors.empty()) state.SkipWithError(result.errors[0].message.c_str());
    if (result.checkpoint.files.size() != 1 || result.checkpoint.files[0].header.tensors.size() != size_t(tensors)) {
      state.SkipWithError("the file does not hold the tensors written");
    }
    benchmark::DoNotOptimize(result.plan.layers.data());
  }
  state.counters["tensors/s"] = benchmark::Counter(double(tensors), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["header_MB"] = double(fs::file_size(files[0])) * 1e-6;
}

BENCHMARK(BM_AuditOneFileManyTensors)
    ->ArgName("tensors")
    ->Arg(2048)
    ->Arg(4096)
    ->Arg(8192)
    ->Arg(16384)
    ->Arg(32768)
    ->Arg(65536)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

BENCHMARK(BM_AuditLargeShard)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->Arg(0)
    ->MinTime(1.0)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

BENCHMARK(BM_AuditLargeShardInterleaved)->MinTime(4.0)->UseRealTime()->Unit(benchmark::kMillisecond);

BENCHMARK(BM_AuditScaleBytes)
    ->ArgNames({"threads", "scale_MiB"})
    ->Args({1, 256})
    ->Args({2, 256})
    ->Args({2, 1024})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace mxdiff::checkpoint

BENCHMARK_MAIN();
