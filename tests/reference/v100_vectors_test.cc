// The V100 model against the hardware-recorded vectors (tests/vectors/): 0 mismatches. A missing
// file is a failure, never a skip.
#include <filesystem>

#include "gtest/gtest.h"
#include "reference/vector_file.h"

namespace mxdiff {
namespace {

constexpr char kV100Vectors[] = MXDIFF_VECTORS_DIR "/v100_hmma884_f32.csv";

TEST(V100VectorsTest, AllRowsMatchTheV100Model) {
  ASSERT_TRUE(std::filesystem::exists(kV100Vectors))
      << "missing " << kV100Vectors << " (tests/vectors/ of the repository)";
  absl::StatusOr<VectorFile> file = ReadVectorFile(kV100Vectors);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(file->rows.size(), 2500u);
  ASSERT_EQ(file->k, 4);
  int mismatches = 0;
  for (const VectorRow& row : file->rows) {
    const uint32_t got = EvaluateVectorRow(StepModel::kV100, row);
    if (!VectorResultMatches(row.d, got)) {
      ++mismatches;
      ADD_FAILURE() << kV100Vectors << ":" << row.line << ": device " << std::hex << row.d << " model "
                    << got;
      if (mismatches > 10) break;
    }
  }
  EXPECT_EQ(mismatches, 0);
}

// The file separates the models: the round-to-nearest models must not pass it (a vacuous-pass guard).
TEST(V100VectorsTest, NearestModelsDisagreeWithTheHardware) {
  absl::StatusOr<VectorFile> file = ReadVectorFile(kV100Vectors);
  ASSERT_TRUE(file.ok()) << file.status();
  for (StepModel model : {StepModel::kSm90Emulated, StepModel::kExact}) {
    int mismatches = 0;
    for (const VectorRow& row : file->rows)
      mismatches += !VectorResultMatches(row.d, EvaluateVectorRow(model, row));
    EXPECT_GT(mismatches, 500) << StepModelName(model);
  }
}

}  // namespace
}  // namespace mxdiff
