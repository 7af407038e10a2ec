#include "fuzz/target_driver.h"

#include <span>

#include "fuzz/case_format.h"

// libFuzzer's byte mutator; absent (null) in the plain replay builds.
extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size) __attribute__((weak));

namespace mxdiff::fuzz {

int RunFuzzInput(std::string_view target, const uint8_t* data, size_t size, const CaseCheck& check) {
  const std::span<const uint8_t> input(data, size);
  static thread_local FuzzCase fuzz_case;  // buffers reused across inputs
  static thread_local MaterializationMemo memo;  // and their generated contents
  if (!DecodeCaseInto(input, fuzz_case, Materialize::kYes, &memo).ok()) return -1;
  if (CheckResult finding = check(fuzz_case)) ReportFindingAndAbort(target, input, *finding);
  return 0;
}

size_t MutateFuzzInput(uint8_t* data, size_t size, size_t max_size, unsigned seed, const MutationProfile& profile) {
  ByteMutator byte_mutator;
  if (&LLVMFuzzerMutate != nullptr) byte_mutator = LLVMFuzzerMutate;
  return MutateEncodedCase(data, size, max_size, seed, profile, byte_mutator);
}

}  // namespace mxdiff::fuzz
