// The plain replay driver of every fuzz target in builds without libFuzzer (gcc): runs
// LLVMFuzzerTestOneInput over the files and directories on the command line, in sorted order.
// Arguments that start with `--` are the target's own flags (LLVMFuzzerInitialize reads them),
// as under libFuzzer. A finding aborts, as under libFuzzer. Exit status: 0 all replayed, 2 an input was unreadable
// or not a valid case (the corpus must hold only valid cases).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "fmt/core.h"
#include "reference/exit_status.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) __attribute__((weak));

int main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "usage: {} FILE_OR_DIR...\n  replays each input through the fuzz target\n", argv[0]);
    return mxdiff::kExitBadInput;
  }
  if (&LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]).starts_with("--")) continue;  // the target's own flags
    const std::filesystem::path path = argv[i];
    std::error_code error;
    if (std::filesystem::is_directory(path, error)) {
      for (const auto& entry : std::filesystem::directory_iterator(path)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
    } else {
      files.push_back(path);
    }
  }
  std::sort(files.begin(), files.end());
  int bad = 0;
  for (const std::filesystem::path& file : files) {
    std::ifstream stream(file, std::ios::binary);
    if (!stream) {
      fmt::print(stderr, "cannot read {}\n", file.string());
      ++bad;
      continue;
    }
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(stream)), std::istreambuf_iterator<char>());
    if (LLVMFuzzerTestOneInput(bytes.data(), bytes.size()) != 0) {
      fmt::print(stderr, "not a valid case: {}\n", file.string());
      ++bad;
    }
  }
  fmt::print("replayed {} inputs, {} rejected\n", files.size(), bad);
  return bad == 0 ? mxdiff::kExitOk : mxdiff::kExitBadInput;
}
