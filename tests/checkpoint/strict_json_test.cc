// ParseStrictJson, the audit's JSON reader (a SAX handler of its own since issue 23, item 10):
// the document it builds is nlohmann's for every valid input, and what it refuses (a repeated
// key at any depth, nesting past the limit, invalid JSON) it refuses with the same messages as
// the callback parser it replaced. Its speed is measured in audit_benchmark
// (BM_AuditOneFileManyTensors), not here.
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "checkpoint/audit_error.h"
#include "checkpoint/strict_json.h"

namespace mxdiff::checkpoint {
namespace {

using nlohmann::json;

TEST(StrictJson, BuildsWhatNlohmannBuilds) {
  for (const char* text : {
           R"({})", R"([])", R"(17)", R"("text")", R"(null)",
           R"({"a":{"dtype":"U8","shape":[2,3],"data_offsets":[0,6]},"__metadata__":{"format":"pt"}})",
           R"({"x":[{"a":1},{"a":2,"b":[true,false,null]}],"y":-3,"z":1.5e300,"u":18446744073709551615})",
           R"({"\u00e9t\u00e9":"\ud83d\ude00","":"empty key","nested":{"deeper":{"deepest":[[],{}]}}})",
           R"(  [ 1 , [ 2 , [ 3 ] ] , { "k" : "v" } ]  )",
       }) {
    absl::StatusOr<json> parsed = ParseStrictJson("doc.json", text, 16, 1);
    ASSERT_TRUE(parsed.ok()) << text << ": " << parsed.status();
    EXPECT_EQ(*parsed, json::parse(text)) << text;
    EXPECT_EQ(parsed->dump(), json::parse(text).dump()) << text;  // number kinds too
  }
}

TEST(StrictJson, RepeatedKeysAtEveryDepth) {
  // At the tensor depth: the tensor is named, as a payload too.
  absl::StatusOr<json> top = ParseStrictJson("h.json", R"({"t":{},"u":{},"t":{}})", 4, 1);
  ASSERT_FALSE(top.ok());
  EXPECT_EQ(top.status().message(),
            "h.json: tensor \"t\": named twice (the JSON parser would silently keep only one of them)");
  EXPECT_EQ(TensorOfError(top.status()), "t");
  // Elsewhere: the key is named.
  absl::StatusOr<json> inner = ParseStrictJson("h.json", R"({"t":{"dtype":"U8","dtype":"I8"}})", 4, 1);
  ASSERT_FALSE(inner.ok());
  EXPECT_EQ(inner.status().message(), "h.json: duplicate name \"dtype\" in one JSON object");
  EXPECT_EQ(TensorOfError(inner.status()), "");
  // Inside objects that are elements of an array, each object is its own scope.
  EXPECT_TRUE(ParseStrictJson("h.json", R"([{"a":1},{"a":2}])", 4, 1).ok());
  absl::StatusOr<json> in_array = ParseStrictJson("h.json", R"([{"a":1},{"b":1,"b":2}])", 4, 1);
  ASSERT_FALSE(in_array.ok());
  EXPECT_EQ(in_array.status().message(), "h.json: duplicate name \"b\" in one JSON object");
  // The index's tensor keys are at depth 2 ({"weight_map": {tensor: shard}}).
  absl::StatusOr<json> index = ParseStrictJson("i.json", R"({"weight_map":{"w":"a","w":"b"}})", 8, 2);
  ASSERT_FALSE(index.ok());
  EXPECT_EQ(TensorOfError(index.status()), "w");
  // The same key in two sibling objects is no repetition.
  EXPECT_TRUE(ParseStrictJson("h.json", R"({"a":{"k":1},"b":{"k":1}})", 4, 1).ok());
}

TEST(StrictJson, DepthLimitIsExact) {
  EXPECT_TRUE(ParseStrictJson("d.json", R"({"a":{"b":[1]}})", 3, 1).ok());
  absl::StatusOr<json> deep = ParseStrictJson("d.json", R"({"a":{"b":[[1]]}})", 3, 1);
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.status().message(), "d.json: nested deeper than the format allows (3 levels)");
  EXPECT_FALSE(ParseStrictJson("d.json", R"([[]])", 1, 1).ok());
  EXPECT_TRUE(ParseStrictJson("d.json", R"([])", 1, 1).ok());
  // Ten thousand open brackets end at the limit, not in a deep recursion.
  EXPECT_FALSE(ParseStrictJson("d.json", std::string(10000, '['), 8, 1).ok());
}

TEST(StrictJson, InvalidJsonKeepsNlohmannsPosition) {
  for (const char* text : {R"({"a":)", R"({"a":1,})", R"({"a":1} x)", "", R"({"a":"\x01"})", "{\"\xC3\x28\":1}"}) {
    absl::StatusOr<json> parsed = ParseStrictJson("bad.json", text, 8, 1);
    ASSERT_FALSE(parsed.ok()) << text;
    std::string expected;
    try {
      const json unused = json::parse(text);
      (void)unused;
    } catch (const json::parse_error& error) {
      expected = error.what();
      expected = expected.substr(expected.find("] ") + 2);
    }
    ASSERT_FALSE(expected.empty()) << text;
    EXPECT_EQ(parsed.status().message(), "bad.json: invalid JSON: " + expected) << text;
  }
}

}  // namespace
}  // namespace mxdiff::checkpoint
