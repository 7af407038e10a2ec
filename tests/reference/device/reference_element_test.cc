// The device reference's per-thread code (reference/device/reference_element.h) run on the
// host against the CPU reference, bit for bit: its row-to-group search, indexing, split loop
// and dequantization are checked where no GPU exists (label cpu). The GPU itself is checked by
// device_reference_test.
#include <random>
#include <string>

#include "gtest/gtest.h"
#include "reference/device/reference_element.h"
#include "reference/reference_gemm.h"
#include "tests/reference/gemm_test_problems.h"
#include "tests/reference/special_values.h"
#include "tests/reference/test_seed.h"

namespace mxdiff {
namespace {

using testing::OwnedProblem;

device_internal::GemmArgs ArgsFor(const OwnedProblem& p, const ReferenceOptions& options) {
  return device_internal::GemmArgs{p.groups,
                                   p.n,
                                   p.k,
                                   p.row_offsets.back(),
                                   options.tactic.cta_k,
                                   options.tactic.splits,
                                   int(options.transform),
                                   int(options.model),
                                   p.row_offsets.data(),
                                   p.activations.data(),
                                   p.packed_codes.data(),
                                   p.scale_bytes.data(),
                                   nullptr};
}

TEST(DeviceReferenceElementTest, EveryElementEqualsCpuReference) {
  std::mt19937_64 rng(testing::TestSeed());
  size_t compared = 0;
  for (StepModel model : kAllStepModels) {
    for (Transform transform : {Transform::kOrdinary, Transform::kFolded}) {
      for (int trial = 0; trial < 8; ++trial) {
        const int k = 32 * (1 + int(rng() % 24));
        const OwnedProblem p = trial % 2 == 0
                                   ? testing::SpecialProblem(rng, 1 + int(rng() % 5), 1 + int(rng() % 24), k, 3, trial % 4 == 0)
                                   : testing::RandomProblem(rng, 1 + int(rng() % 5), 1 + int(rng() % 24), k, 3,
                                                            testing::Values::kWild);
        ReferenceOptions options;
        options.model = model;
        options.transform = transform;
        options.tactic.cta_k = 4 * (1 + int(rng() % 64));
        options.tactic.splits = 1 + int(rng() % 8);
        std::vector<uint32_t> cpu;
        ASSERT_TRUE(ReferenceGemmF32(p.View(), options, cpu).ok());
        const device_internal::GemmArgs args = ArgsFor(p, options);
        for (size_t i = 0; i < cpu.size(); ++i) {
          ASSERT_EQ(device_internal::ReferenceElement(args, int64_t(i)), cpu[i])
              << "element " << i << " of " << p.row_offsets.back() << " x " << p.n << " in " << p.groups
              << " groups, K " << k << ", " << TacticName(options.tactic) << ", " << StepModelName(model)
              << ", transform " << int(transform);
        }
        compared += cpu.size();
      }
    }
  }
  EXPECT_GT(compared, 0u);
}

// Empty groups before, between and after: the search picks the group that owns the row.
TEST(DeviceReferenceElementTest, GroupOfRowSkipsEmptyGroups) {
  const int32_t offsets[] = {0, 0, 2, 2, 2, 3, 3};  // groups 0, 2, 3, 5 empty
  EXPECT_EQ(device_internal::GroupOfRow(offsets, 6, 0), 1);
  EXPECT_EQ(device_internal::GroupOfRow(offsets, 6, 1), 1);
  EXPECT_EQ(device_internal::GroupOfRow(offsets, 6, 2), 4);
}

}  // namespace
}  // namespace mxdiff
