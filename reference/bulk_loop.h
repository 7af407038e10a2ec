// MXDIFF_BULK_LOOP marks a function whose loop runs once per byte of a layer (hundreds of
// thousands to millions of times per fuzz case) over raw pointers and lengths its caller has
// checked. In the fuzzing build, libFuzzer's compare tracing and the sanitizers' per-access
// checks cost 10 to 30 ns per element there (a W13 layer's scale preparation: 28 ms instead of
// 0.7 ms) while every element takes the same path: there is nothing to steer by and no access
// that a check could catch. Raw pointers only: such a function cannot inline sanitized code
// (std::span's members, say), so it would call them per element instead.
#pragma once

#if defined(__clang__) && !defined(__CUDA__)
#define MXDIFF_BULK_LOOP __attribute__((no_sanitize("coverage", "address", "undefined")))
#else
#define MXDIFF_BULK_LOOP
#endif
