// The scan's threads and reads (issue 23, item 16): the default thread count follows the CPUs
// the process may run on and the amount of work, and every thread count gives the same result
// from the files (pread into each worker's buffer) as from memory.
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fmt/core.h"
#include "gtest/gtest.h"
#include "checkpoint/audit.h"
#include "checkpoint/scale_scan.h"

namespace mxdiff::checkpoint {
namespace {

TEST(ScaleScan, DefaultThreadsFollowTheWorkAndTheAffinityMask) {
  EXPECT_EQ(DefaultScanThreads(0), 1);
  EXPECT_EQ(DefaultScanThreads(kScanBytesPerThread - 1), 1) << "a small audit starts no thread";
  cpu_set_t all;
  ASSERT_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
  EXPECT_EQ(DefaultScanThreads(uint64_t(1) << 50), CPU_COUNT(&all)) << "one per CPU the process may run on";
  if (CPU_COUNT(&all) >= 2) EXPECT_EQ(DefaultScanThreads(2 * kScanBytesPerThread), 2);
  // Narrowed to one CPU (taskset, a container's cpuset): one thread, whatever the machine has.
  cpu_set_t one;
  CPU_ZERO(&one);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &all)) {
      CPU_SET(cpu, &one);
      break;
    }
  }
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  const int narrowed = DefaultScanThreads(uint64_t(1) << 50);
  ASSERT_EQ(sched_setaffinity(0, sizeof(all), &all), 0);
  EXPECT_EQ(narrowed, 1);
}

// A file of `tensors` U8 scale tensors [rows, 4] beside I8 weights [rows, 64], every byte
// admitted but for a few refused ones.
std::vector<uint8_t> BuildFile(int tensors, uint64_t rows) {
  std::string header = "{";
  uint64_t offset = 0;
  for (int t = 0; t < tensors; ++t) {
    header += fmt::format("{}\"l{}.weight\":{{\"dtype\":\"I8\",\"shape\":[{},64],\"data_offsets\":[{},{}]}}",
                          t ? "," : "", t, rows, offset, offset + rows * 64);
    offset += rows * 64;
    header += fmt::format(",\"l{}.scale\":{{\"dtype\":\"F8_E8M0\",\"shape\":[{},4],\"data_offsets\":[{},{}]}}", t, rows,
                          offset, offset + rows * 4);
    offset += rows * 4;
  }
  header += "}";
  std::vector<uint8_t> bytes(8 + header.size() + offset, 0);
  for (int i = 0; i < 8; ++i) bytes[size_t(i)] = uint8_t(uint64_t(header.size()) >> (8 * i));
  std::copy(header.begin(), header.end(), bytes.begin() + 8);
  const size_t data = 8 + header.size();
  uint64_t state = 12345;
  for (size_t i = data; i < bytes.size(); ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    bytes[i] = uint8_t(114 + (state >> 60) % 12);
  }
  bytes[data + 64 * rows + 7] = 0xFF;       // refused bytes in tensor 0's scales
  bytes[bytes.size() - 3] = 112;            // and in the last tensor's
  return bytes;
}

TEST(ScaleScan, EveryThreadCountReadsTheFileAsMemoryHoldsIt) {
  const std::vector<uint8_t> bytes = BuildFile(9, 5000);
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / fmt::format("mxdiff_scale_scan_test_{}.safetensors", ::getpid());
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  const Checkpoint checkpoint = LoadCheckpoint({path.string()}, false);
  ASSERT_TRUE(checkpoint.errors.empty());
  absl::StatusOr<AuditPlan> plan = PlanAudit(checkpoint, {});
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->scales.size(), 9u);
  ScanOptions options;
  options.chunk_bytes = 4096;  // several chunks a tensor: workers share tensors
  options.threads = 1;
  const MemoryFiles memory({bytes});
  const ScanResult expected = ScanScales(checkpoint, *plan, memory, options);
  ASSERT_TRUE(expected.errors.empty());
  EXPECT_EQ(expected.tensors[0].refused, 1u);
  EXPECT_EQ(expected.tensors[8].refused, 1u);
  for (int threads : {0, 1, 2, 3, 8}) {
    options.threads = threads;
    const MappedFiles files({path.string()});
    const ScanResult scan = ScanScales(checkpoint, *plan, files, options);
    ASSERT_TRUE(scan.errors.empty()) << scan.errors[0].message;
    for (size_t s = 0; s < scan.tensors.size(); ++s) {
      EXPECT_TRUE(scan.tensors[s].scanned);
      EXPECT_EQ(scan.tensors[s].histogram, expected.tensors[s].histogram) << "threads " << threads << ", tensor " << s;
      EXPECT_EQ(scan.tensors[s].refused, expected.tensors[s].refused);
      ASSERT_EQ(scan.tensors[s].first_refused.size(), expected.tensors[s].first_refused.size());
      for (size_t r = 0; r < scan.tensors[s].first_refused.size(); ++r) {
        EXPECT_EQ(scan.tensors[s].first_refused[r].index, expected.tensors[s].first_refused[r].index);
      }
    }
  }
  std::filesystem::remove(path);
}

TEST(ScaleScan, ReadIntoABufferEqualsTheWindowAndReusesTheBuffer) {
  const std::vector<uint8_t> bytes = BuildFile(2, 3000);
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / fmt::format("mxdiff_scale_read_test_{}.bin", ::getpid());
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  const MappedFiles files({path.string()});
  std::vector<uint8_t> buffer;
  for (const auto& [offset, length] : {std::pair<uint64_t, uint64_t>{8, 100000}, {5, 7}, {0, bytes.size()}}) {
    absl::StatusOr<std::span<const uint8_t>> read = files.Read(0, offset, length, buffer);
    ASSERT_TRUE(read.ok()) << read.status();
    ASSERT_EQ(read->size(), length);
    EXPECT_TRUE(std::equal(read->begin(), read->end(), bytes.begin() + ptrdiff_t(offset)));
    absl::StatusOr<ByteWindow> window = files.Window(0, offset, length);
    ASSERT_TRUE(window.ok());
    EXPECT_TRUE(std::equal(read->begin(), read->end(), window->bytes().begin(), window->bytes().end()));
  }
  EXPECT_EQ(buffer.size(), bytes.size()) << "grown to the largest read, not beyond";
  // Past the end: the file is shorter than wanted, an error naming it.
  absl::StatusOr<std::span<const uint8_t>> beyond = files.Read(0, bytes.size() - 4, 8, buffer);
  ASSERT_FALSE(beyond.ok());
  EXPECT_NE(beyond.status().message().find("shorter than when its header was read"), std::string::npos);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace mxdiff::checkpoint
