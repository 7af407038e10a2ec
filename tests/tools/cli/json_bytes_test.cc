// checkpoint/json_bytes.h: the same text as nlohmann's dump for valid UTF-8 (so every report reads
// as before), and bytes that are not UTF-8 escaped one by one as \udcXX instead of a throw or U+FFFD.
#include "checkpoint/json_bytes.h"

#include <gtest/gtest.h>

#include <string>

#include "nlohmann/json.hpp"

namespace mxdiff::cli {
namespace {

TEST(JsonBytes, ValidUtf8IsWrittenAsNlohmannWritesIt) {
  nlohmann::ordered_json doc = {
      {"file", "/tmp/caf\xc3\xa9/\xe2\x82\xac/\xf0\x9f\x98\x80.case"},
      {"quote\"back\\slash", "tab\tnew\nline\r\b\f\x01\x1f\x7f"},
      {"numbers", {0, -1, 3.5, 1e300, 18446744073709551615ull}},
      {"flags", {true, false, nullptr}},
      {"empty", {{"object", nlohmann::ordered_json::object()}, {"array", nlohmann::ordered_json::array()}}},
      {"nested", {{{"a", {1, {2, 3}}}}, "x"}},
  };
  EXPECT_EQ(DumpJson(doc), doc.dump());
  EXPECT_EQ(DumpJson(doc, 2), doc.dump(2));
  EXPECT_EQ(DumpJson(doc, 0), doc.dump(0));
  const nlohmann::json sorted = doc;  // nlohmann::json: members in name order
  EXPECT_EQ(DumpJson(sorted, 2), sorted.dump(2));
}

TEST(JsonBytes, EveryByteOutsideUtf8IsOneSurrogateEscape) {
  EXPECT_EQ(JsonString("a\xff" "b"), "\"a\\udcffb\"");
  EXPECT_EQ(JsonString("\x80"), "\"\\udc80\"");
  EXPECT_EQ(JsonString("\xc3"), "\"\\udcc3\"");                    // truncated sequence
  EXPECT_EQ(JsonString("\xc3\x28"), "\"\\udcc3(\"");                // bad continuation
  EXPECT_EQ(JsonString("\xc0\xaf"), "\"\\udcc0\\udcaf\"");          // overlong '/'
  EXPECT_EQ(JsonString("\xed\xa0\x80"), "\"\\udced\\udca0\\udc80\"");  // an encoded surrogate
  EXPECT_EQ(JsonString("\xf4\x90\x80\x80"), "\"\\udcf4\\udc90\\udc80\\udc80\"");  // above U+10FFFF
  EXPECT_EQ(JsonString("\xe2\x82\xac\xfe"), "\"\xe2\x82\xac\\udcfe\"");  // valid, then not
  const nlohmann::json doc = {{"file", "/tmp/x\xff.case"}};
  EXPECT_THROW(doc.dump(), nlohmann::json::type_error);  // what repro --json aborted on
  EXPECT_EQ(DumpJson(doc), "{\"file\":\"/tmp/x\\udcff.case\"}");
}

TEST(JsonBytes, ByteEscapesReplacedReadsBackWithNlohmann) {
  const nlohmann::json value = {{"path", std::string("a\xff\"b\\udcff")}, {"pair", "\xf0\x9f\x98\x80"}};
  const std::string text = DumpJson(value);
  EXPECT_FALSE(nlohmann::json::accept(text));
  const nlohmann::json back = nlohmann::json::parse(ByteEscapesReplaced(text));
  // The byte becomes U+FFFD; an escaped backslash before "udcff" is text, not an escape.
  EXPECT_EQ(back["path"], "a\xef\xbf\xbd\"b\\udcff");
  EXPECT_EQ(back["pair"], "\xf0\x9f\x98\x80");
  // A surrogate pair written as escapes is kept whole.
  EXPECT_EQ(ByteEscapesReplaced(R"({"e":"\ud83d\ude00","b":"\udc80"})"), R"({"e":"\ud83d\ude00","b":"\ufffd"})");
}

}  // namespace
}  // namespace mxdiff::cli
