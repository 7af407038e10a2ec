// The per-element scans of a module's output that every case runs (a huge case's output is a
// million elements, scanned for each of its six runs): compiled without coverage and sanitizers in
// the fuzz build (fuzz/CMakeLists.txt), so they are vector code, and the harness's own loops add
// no coverage that the fuzzer would steer by.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace mxdiff::fuzz {

// No kernel writes this: every NaN a kernel produces is the canonical 0x7FFF (docs/numerics.md).
inline constexpr uint16_t kOutputPoison = 0x7E5A;

// Whether an output element still holds a poison: the differential's (kOutputPoison) or the
// runner's staging buffer's (kRunnerOutputPoison, kernels/output_poison.h).
bool Unwritten(uint16_t bits);

// The index of the first unwritten element; output.size() where every one was written.
size_t FirstUnwritten(std::span<const uint16_t> output);

// The index of the first written element that differs from `reference` (of output's size);
// output.size() where there is none.
size_t FirstWrittenMismatch(std::span<const uint16_t> output, std::span<const uint16_t> reference);

}  // namespace mxdiff::fuzz
