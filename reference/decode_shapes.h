// The per-rank shapes of DeepSeek V4-Flash decode (docs/numerics.md, shapes): the one list that
// the dispatch table, the tests, the benchmarks and the fuzzers' real-shape cases use.
#pragma once

#include <string_view>

namespace mxdiff {

inline constexpr int kRoutedExperts = 256;
inline constexpr int kDecodeTopK = 6;     // one decode token: 6 experts x 1 row

struct DecodeShape {
  std::string_view name;
  int n;
  int k;
};

inline constexpr DecodeShape kW13Tp4{"W13 PP2xTP4", 1024, 4096};
inline constexpr DecodeShape kW2Tp4{"W2 PP2xTP4", 4096, 512};
inline constexpr DecodeShape kW13Tp8{"W13 TP8", 512, 4096};
inline constexpr DecodeShape kW2Tp8{"W2 TP8", 4096, 256};
inline constexpr DecodeShape kDecodeShapes[] = {kW13Tp4, kW2Tp4, kW13Tp8, kW2Tp8};

}  // namespace mxdiff
