// libFuzzer entry points of fuzz_transform (the property: fuzz/transform_target.h).
#include <cstddef>
#include <cstdint>

#include "fuzz/transform_target.h"
#include "fuzz/target_driver.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return mxdiff::fuzz::RunFuzzInput("fuzz_transform", data, size, mxdiff::fuzz::CheckTransformCase);
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  return mxdiff::fuzz::MutateFuzzInput(data, size, max_size, seed, mxdiff::fuzz::kTransformProfile);
}
