// Seeds for random tests: MXDIFF_SEED=<n> replays a run; otherwise a fresh seed. Every test
// that draws prints the seed it used, so any failure can be replayed.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "gtest/gtest.h"

namespace mxdiff::testing {

inline uint64_t TestSeed() {
  uint64_t seed;
  if (const char* text = std::getenv("MXDIFF_SEED"); text != nullptr && *text != '\0') {
    seed = std::strtoull(text, nullptr, 0);
  } else {
    seed = (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
  }
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::printf("[ seed     ] %s.%s: MXDIFF_SEED=%llu\n", info ? info->test_suite_name() : "?",
              info ? info->name() : "?", static_cast<unsigned long long>(seed));
  ::testing::Test::RecordProperty("MXDIFF_SEED", std::to_string(seed));
  return seed;
}

}  // namespace mxdiff::testing
