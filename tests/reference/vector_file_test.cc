#include "reference/vector_file.h"

#include <cstdio>
#include <filesystem>

#include "gtest/gtest.h"

namespace mxdiff {
namespace {

constexpr std::string_view kGoodRow = "3bd5,3c3e,b534,3df8,38ca,b935,36bf,34ec,3f7f418c,3f9b7dec";

void ExpectError(std::string_view text, std::string_view want_substring) {
  absl::StatusOr<VectorFile> file = ParseVectorFile(text, "in.csv");
  ASSERT_FALSE(file.ok()) << text;
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(file.status().message()).find(want_substring), std::string::npos) << file.status();
}

TEST(VectorFileTest, ParsesRowsCommentsAndLineNumbers) {
  const std::string text = "# one\n# two\n\n" + std::string(kGoodRow) + "\r\n" + std::string(kGoodRow) + "\n";
  absl::StatusOr<VectorFile> file = ParseVectorFile(text, "in.csv");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->k, 4);
  ASSERT_EQ(file->rows.size(), 2u);
  EXPECT_EQ(file->comments.size(), 2u);
  EXPECT_EQ(file->rows[0].line, 4);
  EXPECT_EQ(file->rows[1].line, 5);
  EXPECT_EQ(file->rows[0].a[0], 0x3bd5);
  EXPECT_EQ(file->rows[0].b[3], 0x34ec);
  EXPECT_EQ(file->rows[0].c, 0x3f7f418cu);
  EXPECT_EQ(file->rows[0].d, 0x3f9b7decu);
}

TEST(VectorFileTest, AnyMultipleOfFourK) {
  std::string row;
  for (int i = 0; i < 16; ++i) row += "3c00,";  // K = 8: a = b = 1
  row += "00000000,41000000";                   // 8 x 1 = 8
  absl::StatusOr<VectorFile> file = ParseVectorFile(row, "k8.csv");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->k, 8);
  for (StepModel model : kAllStepModels) EXPECT_EQ(EvaluateVectorRow(model, file->rows[0]), 0x41000000u);
}

TEST(VectorFileTest, BadInputNamesFileAndLine) {
  ExpectError("3bd5,3c3e\n", "in.csv:1: 2 columns");
  ExpectError(std::string(kGoodRow) + "\n3bd5,3c3e,b534,3df8,38ca,b935,36bf,34ec,3f7f418c\n",
              "in.csv:2: 9 columns");
  ExpectError("3bd5,3c3e,b534,3df8,38ca,b935,36bf,34ec,3f7f418c,3f9b7dec,0,0\n", "in.csv:1: 12 columns");
  ExpectError("3bd5,3c3e,b534,3dfz,38ca,b935,36bf,34ec,3f7f418c,3f9b7dec\n", "in.csv:1: column 4 (a3)");
  ExpectError("3bd5,3c3e,b534,3df8,38ca,b935,36bf,134ec,3f7f418c,3f9b7dec\n", "column 8 (b3)");
  ExpectError("3bd5,3c3e,b534,3df8,38ca,b935,36bf,34ec,,3f9b7dec\n", "column 9 (c)");
  ExpectError("3bd5,3c3e,b534,3df8,38ca,b935,36bf,34ec,3f7f418c,0x3f9b7dec\n", "column 10 (d)");
  ExpectError(std::string(kGoodRow) + "\n" + std::string(kGoodRow.size(), ',') + "\n", "in.csv:2:");
  ExpectError("# only comments\n", "no data rows");
  // K = 8 after K = 4.
  std::string k8;
  for (int i = 0; i < 16; ++i) k8 += "3c00,";
  ExpectError(std::string(kGoodRow) + "\n" + k8 + "0,0\n",
              "in.csv:2: 18 columns (K = 8) but the file's first row has K = 4");
}

TEST(VectorFileTest, WriteThenReadRoundTrips) {
  VectorFile file;
  file.comments = {"device test", "columns"};
  VectorRow row;
  row.a = {0x0001, 0xFFFF, 0x7C00, 0x8000};
  row.b = {0x3C00, 0x0400, 0x0000, 0x1234};
  row.c = 0x80000001;
  row.d = 0x7FFFFFFF;
  file.rows = {row, row};
  const std::string path = ::testing::TempDir() + "/mxdiff_vector_file_test.csv";
  ASSERT_TRUE(WriteVectorFile(path, file).ok());
  absl::StatusOr<VectorFile> back = ReadVectorFile(path);
  std::remove(path.c_str());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->comments, file.comments);
  ASSERT_EQ(back->rows.size(), 2u);
  EXPECT_EQ(back->rows[1].a, row.a);
  EXPECT_EQ(back->rows[1].b, row.b);
  EXPECT_EQ(back->rows[1].c, row.c);
  EXPECT_EQ(back->rows[1].d, row.d);
  EXPECT_EQ(FormatVectorRow(row), "0001,ffff,7c00,8000,3c00,0400,0000,1234,80000001,7fffffff");
}

TEST(VectorFileTest, UnreadablePathsAreErrorsWithThePath) {
  absl::StatusOr<VectorFile> missing = ReadVectorFile("/nonexistent/dir/v.csv");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(std::string(missing.status().message()).find("/nonexistent/dir/v.csv"), std::string::npos);
  absl::StatusOr<VectorFile> directory = ReadVectorFile(::testing::TempDir());
  ASSERT_FALSE(directory.ok());
  EXPECT_FALSE(WriteVectorFile("/nonexistent/dir/v.csv", VectorFile{}).ok());
}

TEST(VectorFileTest, NaNPolicy) {
  EXPECT_TRUE(VectorResultMatches(0x7FC00000, 0x7FFFFFFF));
  EXPECT_TRUE(VectorResultMatches(0x3F800000, 0x3F800000));
  EXPECT_FALSE(VectorResultMatches(0x3F800000, 0x3F800001));
  EXPECT_FALSE(VectorResultMatches(0x7F800000, 0x7FFFFFFF));  // Inf is not NaN
  EXPECT_FALSE(VectorResultMatches(0x00000000, 0x80000000));  // zeros differ by sign
}

}  // namespace
}  // namespace mxdiff
