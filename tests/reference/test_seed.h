// Seeds for random tests: MXDIFF_SEED=<n> replays a run; otherwise a fresh seed. Every test
// that draws prints the seed it used, so any failure can be replayed. The one place MXDIFF_SEED
// is read (gtest tests, test programs and benchmarks alike).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "gtest/gtest.h"

namespace mxdiff::testing {

// MXDIFF_SEED (any base strtoull reads with base 0) if set and not empty, else a fresh seed.
inline uint64_t SeedFromEnvironment() {
  if (const char* text = std::getenv("MXDIFF_SEED"); text != nullptr && *text != '\0') {
    return std::strtoull(text, nullptr, 0);
  }
  return (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
}

// Outside a gtest test (a test program, a benchmark): prints "<what>: seed N (replay with
// MXDIFF_SEED=N)".
inline uint64_t TestSeed(const char* what) {
  const uint64_t seed = SeedFromEnvironment();
  std::printf("%s: seed %llu (replay with MXDIFF_SEED=%llu)\n", what, static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  return seed;
}

// Inside a gtest test: printed with the test's name and recorded as a test property.
inline uint64_t TestSeed() {
  const uint64_t seed = SeedFromEnvironment();
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::printf("[ seed     ] %s.%s: MXDIFF_SEED=%llu\n", info ? info->test_suite_name() : "?",
              info ? info->name() : "?", static_cast<unsigned long long>(seed));
  ::testing::Test::RecordProperty("MXDIFF_SEED", std::to_string(seed));
  return seed;
}

}  // namespace mxdiff::testing
