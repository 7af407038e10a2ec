// libFuzzer entry points of fuzz_dispatch (the property: fuzz/dispatch_target.h).
#include <cstddef>
#include <cstdint>

#include "fuzz/dispatch_target.h"
#include "fuzz/target_driver.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return mxdiff::fuzz::RunFuzzInput("fuzz_dispatch", data, size, mxdiff::fuzz::CheckDispatchCase);
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  return mxdiff::fuzz::MutateFuzzInput(data, size, max_size, seed, mxdiff::fuzz::kDispatchProfile);
}
