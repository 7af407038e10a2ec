// repro for fuzz_layer findings (fuzz/README.md, "fuzz_layer"): a file that starts with the layer
// case magic `MXDL` goes here from repro_main.cc. Prints the case, then per replay what the CPU
// expects (routes, refusal) and the check's verdict: the CPU side always, the device layer where a
// GPU is usable. With `emit`, copies the case into corpus/fuzz_layer/ (next to `regressions_dir`)
// as regression-<signature>.<hash>.case, where fuzz_layer_corpus_replay replays it from then on.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace mxdiff::repro {

bool IsLayerCase(std::span<const uint8_t> bytes);

// Exit status of repro: 0 clean, 1 a finding reproduced, 2 bad input.
int ReproLayerCase(const std::string& path, std::span<const uint8_t> bytes, bool emit,
                   const std::string& regressions_dir);

}  // namespace mxdiff::repro
