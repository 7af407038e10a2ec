#include "fuzz/findings.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "absl/status/status.h"
#include "fmt/format.h"

namespace mxdiff::fuzz {
namespace {

uint64_t Fnv1a64(std::span<const uint8_t> bytes) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (uint8_t byte : bytes) hash = (hash ^ byte) * 0x100000001b3ull;
  return hash;
}

absl::Status WriteFile(const std::string& path, std::span<const uint8_t> bytes) {
  FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return absl::UnavailableError(fmt::format("cannot open {} for writing", path));
  const size_t written = std::fwrite(bytes.data(), 1, bytes.size(), file);
  const bool closed = std::fclose(file) == 0;
  if (written != bytes.size() || !closed) return absl::DataLossError(fmt::format("short write to {}", path));
  return absl::OkStatus();
}

}  // namespace

std::string FindingsDirectory() {
  const char* dir = std::getenv("MXDIFF_FINDINGS_DIR");
  return dir != nullptr && *dir != '\0' ? dir : "mxdiff-findings";
}

std::string SignatureStem(std::string_view signature) {
  std::string stem;
  for (char c : signature) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                      c == '=' || c == '.';
    stem += safe ? c : '_';
  }
  return stem;
}

absl::StatusOr<std::string> WriteFinding(std::string_view target, std::span<const uint8_t> input,
                                         const Finding& finding) {
  const std::string dir = FindingsDirectory();
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return absl::UnavailableError(fmt::format("cannot create {}: {}", dir, error.message()));
  const std::string base =
      fmt::format("{}/{}.{}.{:016x}", dir, target, SignatureStem(finding.signature), Fnv1a64(input));
  absl::Status status = WriteFile(base + ".case", input);
  if (!status.ok()) return status;
  const std::string text = fmt::format("signature: {}\ntarget: {}\ninput: {}.case\nrepro: repro {}.case\n\n{}\n",
                                       finding.signature, target, base, base, finding.description);
  status = WriteFile(base + ".txt", std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()),
                                                             text.size()));
  if (!status.ok()) return status;
  return base + ".case";
}

void ReportFindingAndAbort(std::string_view target, std::span<const uint8_t> input, const Finding& finding) {
  absl::StatusOr<std::string> path = WriteFinding(target, input, finding);
  fmt::print(stderr, "\n==mxdiff== FINDING {}\n==mxdiff== target: {}\n==mxdiff== saved: {}\n{}\n",
             finding.signature, target, path.ok() ? *path : std::string(path.status().message()),
             finding.description);
  std::fflush(stderr);
  std::abort();
}

}  // namespace mxdiff::fuzz
