// How fast `mxdiff audit` reads scale bytes from the page cache, and how much memory it takes
// (issue 8, item 6). The checkpoint is generated with DeepSeek V4-Flash's shapes and so its real
// ratio of scale to weight bytes (1 scale byte per 16 packed code bytes): per layer 16 routed
// experts, w1/w3 [2048, 4096/2] I8 codes with [2048, 128] F8_E8M0 scales, w2 [4096, 2048/2]
// with [4096, 64], one shard file per layer. Only the scale bytes are written; the weights are
// holes of a sparse file, which the audit never reads (that is the point), so the files have
// their real sizes and offsets without costing the disk. Scale bytes are raw 114..126, as the
// seed's audit of the real checkpoint found. The files are read once before timing (page cache).
//
//   build/tests/tools/audit/audit_benchmark [--benchmark_filter=...]
//
// Arguments: threads, MiB of scale bytes. Counters: scale_bytes/s (the claim: >= 2 GB/s on the
// 2-core machine with both cores), peak_rss_MiB (VmHWM of the process during the audits, reset
// before each benchmark: it must not grow with the checkpoint). MXDIFF_AUDIT_BENCH_DIR picks the
// folder (default: the temporary folder); the files are removed at exit.
#include <fcntl.h>
#include <unistd.h>

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
#include "tools/audit/audit.h"

namespace mxdiff::audit {
namespace {

namespace fs = std::filesystem;

constexpr int kExperts = 16;
constexpr uint64_t kHidden = 4096, kInter = 2048;

fs::path BenchDir() {
  const char* env = std::getenv("MXDIFF_AUDIT_BENCH_DIR");
  return env != nullptr ? fs::path(env) : fs::temp_directory_path() / fmt::format("mxdiff_audit_bench_{}", ::getpid());
}

// One layer's shard: the header, scale bytes written, weights left as holes.
void WriteLayer(const fs::path& path, int layer, std::mt19937_64& rng) {
  struct Tensor {
    std::string name;
    std::string dtype;
    std::vector<uint64_t> shape;
    uint64_t bytes;
  };
  std::vector<Tensor> tensors;
  for (int e = 0; e < kExperts; ++e) {
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
  static const bool cleanup = [] {
    std::atexit([] { fs::remove_all(BenchDir()); });
    return true;
  }();
  (void)cleanup;
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

void BM_AuditScaleBytes(benchmark::State& state) {
  const int threads = int(state.range(0));
  const Generated& checkpoint = Checkpoint(int(state.range(1)));
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
  state.counters["files"] = double(checkpoint.files.size());
  state.counters["peak_rss_MiB"] = PeakRssMiB();
}

BENCHMARK(BM_AuditScaleBytes)
    ->ArgNames({"threads", "scale_MiB"})
    ->Args({1, 256})
    ->Args({2, 256})
    ->Args({2, 1024})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace mxdiff::audit

BENCHMARK_MAIN();
