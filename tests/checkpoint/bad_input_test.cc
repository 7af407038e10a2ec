// Bad input: each a clear error naming the file and, where there is one, the tensor, and the
// exit status 2; never a crash. --keep-going audits the rest and still fails.
#include <sys/stat.h>

#include <filesystem>

#include "gtest/gtest.h"
#include "tests/checkpoint/safetensors_builder.h"
#include "checkpoint/audit.h"

namespace mxdiff::checkpoint {
namespace {

using testing::BuildFile;
using testing::RawFile;
using testing::TempDir;

AuditOptions KeepGoing(bool keep_going) {
  AuditOptions options;
  options.keep_going = keep_going;
  return options;
}

// One file's audit: its single error.
AuditError OnlyError(const std::vector<std::string>& paths, bool keep_going = false) {
  const AuditResult result = RunAudit(paths, KeepGoing(keep_going));
  EXPECT_EQ(ExitStatus(result), 2);
  EXPECT_EQ(result.errors.size(), 1u);
  for (const AuditError& error : result.errors) std::printf("  error: %s\n", error.message.c_str());
  return result.errors.empty() ? AuditError{} : result.errors.front();
}

void ExpectError(const AuditError& error, const std::string& file, const std::string& tensor,
                 const std::string& phrase) {
  EXPECT_EQ(error.file, file);
  EXPECT_EQ(error.tensor, tensor);
  EXPECT_EQ(error.message.rfind(file + ":", 0), 0u) << error.message;
  if (!tensor.empty()) {
    EXPECT_NE(error.message.find("tensor \"" + tensor + "\""), std::string::npos) << error.message;
  }
  EXPECT_NE(error.message.find(phrase), std::string::npos) << error.message;
}

// A header of tensors given as JSON text, with `data_bytes` of data after it.
std::vector<uint8_t> Header(const std::string& tensors_json, size_t data_bytes) {
  return RawFile(tensors_json, std::vector<uint8_t>(data_bytes, 120));
}

const std::string kScale = R"("a.scale":{"dtype":"F8_E8M0","shape":[4,2],"data_offsets":[0,8]})";

TEST(BadInput, TruncatedBeforeTheHeaderLength) {
  TempDir dir;
  const std::string file = dir.Write("short.safetensors", std::vector<uint8_t>{1, 2, 3});
  ExpectError(OnlyError({file}), file, "", "truncated: 3 bytes");
}

TEST(BadInput, TruncatedData) {
  TempDir dir;
  std::vector<uint8_t> bytes = BuildFile({{"a.scale", "F8_E8M0", {64, 8}}, {"b.scale", "F8_E8M0", {64, 8}}});
  bytes.resize(bytes.size() - 100);
  const std::string file = dir.Write("cut.safetensors", bytes);
  ExpectError(OnlyError({file}), file, "b.scale", "reach beyond the data section");
}

TEST(BadInput, HeaderLengthBeyondTheFile) {
  TempDir dir;
  std::vector<uint8_t> bytes = Header("{" + kScale + "}", 8);
  bytes[0] += 100;  // the length now exceeds the file
  const std::string file = dir.Write("long.safetensors", bytes);
  ExpectError(OnlyError({file}), file, "", "reaches beyond the end of the file");
  bytes[0] = 0;
  bytes[5] = 0x10;  // 2^44: beyond the format's 100 MB limit
  const std::string huge = dir.Write("huge.safetensors", bytes);
  ExpectError(OnlyError({huge}), huge, "", "exceeds the format's limit of 100000000 bytes");
}

TEST(BadInput, InvalidJson) {
  TempDir dir;
  const std::string file = dir.Write("bad.safetensors", Header(R"({"a.scale":{"dtype":"F8_E8M0",)", 0));
  ExpectError(OnlyError({file}), file, "", "invalid JSON");
  const std::string not_json = dir.Write("text.safetensors", Header("hello", 0));
  ExpectError(OnlyError({not_json}), not_json, "", "does not start with '{'");
  const std::string array = dir.Write("deep.safetensors", Header(R"({"a":{"dtype":"U8","shape":[[1]],"data_offsets":[0,1]}})", 1));
  ExpectError(OnlyError({array}), array, "", "nested deeper");
}

TEST(BadInput, NonUtf8Json) {
  TempDir dir;
  std::string header = "{" + kScale + "}";
  header.replace(header.find("a.scale"), 1, "\xC3\x28");  // an ill-formed UTF-8 sequence in a name
  const std::string file = dir.Write("latin.safetensors", Header(header, 8));
  const AuditError error = OnlyError({file});
  ExpectError(error, file, "", "invalid JSON");
  EXPECT_NE(error.message.find("UTF-8"), std::string::npos) << error.message;
}

TEST(BadInput, UnknownDtype) {
  TempDir dir;
  const std::string file =
      dir.Write("dtype.safetensors", Header(R"({"a.scale":{"dtype":"F8_E9M9","shape":[4,2],"data_offsets":[0,8]}})", 8));
  ExpectError(OnlyError({file}), file, "a.scale", "unknown dtype \"F8_E9M9\"");
}

TEST(BadInput, ShapeAndByteSizeDisagree) {
  TempDir dir;
  const std::string file =
      dir.Write("size.safetensors", Header(R"({"a.scale":{"dtype":"F8_E8M0","shape":[4,3],"data_offsets":[0,8]}})", 8));
  ExpectError(OnlyError({file}), file, "a.scale", "shape [4, 3] of dtype F8_E8M0 needs 12 bytes, data_offsets [0, 8] hold 8");
  const std::string f32 =
      dir.Write("f32.safetensors", Header(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,3]}})", 3));
  ExpectError(OnlyError({f32}), f32, "a", "needs 12 bytes");
  const std::string negative =
      dir.Write("neg.safetensors", Header(R"({"a":{"dtype":"U8","shape":[-3],"data_offsets":[0,3]}})", 3));
  ExpectError(OnlyError({negative}), negative, "a", "not a non-negative integer");
  const std::string missing = dir.Write("nokey.safetensors", Header(R"({"a":{"dtype":"U8","shape":[3]}})", 3));
  ExpectError(OnlyError({missing}), missing, "a", "no 'data_offsets'");
  const std::string overflow = dir.Write(
      "overflow.safetensors",
      Header(R"({"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0));
  ExpectError(OnlyError({overflow}), overflow, "a", "too large");
}

TEST(BadInput, OffsetsOutOfRange) {
  TempDir dir;
  const std::string file = dir.Write(
      "range.safetensors", Header(R"({"a.scale":{"dtype":"F8_E8M0","shape":[4,2],"data_offsets":[8,16]}})", 8));
  // [8, 16] in an 8-byte data section: beyond it (and a gap before it would come second).
  ExpectError(OnlyError({file}), file, "a.scale", "reach beyond the data section (8 bytes)");
}

TEST(BadInput, OverlappingOffsets) {
  TempDir dir;
  const std::string file = dir.Write(
      "overlap.safetensors",
      Header(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[8],"data_offsets":[4,12]}})",
             12));
  ExpectError(OnlyError({file}), file, "b", "overlap tensor \"a\" at [0, 8]");
}

TEST(BadInput, UnorderedOffsets) {
  TempDir dir;
  const std::string file =
      dir.Write("reversed.safetensors", Header(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[8,0]}})", 8));
  ExpectError(OnlyError({file}), file, "a", "reversed (begin after end)");
}

TEST(BadInput, GapsAndTrailingBytes) {
  TempDir dir;
  const std::string gap = dir.Write(
      "gap.safetensors",
      Header(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[6,10]}})",
             10));
  ExpectError(OnlyError({gap}), gap, "b", "gap of 2 bytes after tensor \"a\"");
  const std::string trailing =
      dir.Write("trailing.safetensors", Header(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", 9));
  ExpectError(OnlyError({trailing}), trailing, "", "5 bytes after the last tensor's data");
}

TEST(BadInput, DuplicateNames) {
  TempDir dir;
  const std::string file = dir.Write(
      "dup.safetensors",
      Header(R"({"a.scale":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"a.scale":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})",
             8));
  ExpectError(OnlyError({file}), file, "a.scale", "named twice");
  const std::string key = dir.Write(
      "dupkey.safetensors", Header(R"({"a":{"dtype":"U8","dtype":"I8","shape":[4],"data_offsets":[0,4]}})", 4));
  ExpectError(OnlyError({key}), key, "", "duplicate name \"dtype\"");
  // The same tensor in two files of one checkpoint.
  const std::string one = dir.Write("one.safetensors", BuildFile({{"x.scale", "F8_E8M0", {4}}}));
  const std::string two = dir.Write("two.safetensors", BuildFile({{"x.scale", "F8_E8M0", {4}}}));
  ExpectError(OnlyError({one, two}), two, "x.scale", "also in " + one);
}

TEST(BadInput, MetadataMustBeStrings) {
  TempDir dir;
  const std::string file = dir.Write("meta.safetensors", Header(R"({"__metadata__":{"format":1}})", 0));
  ExpectError(OnlyError({file}), file, "", "'__metadata__' entry \"format\" is not a string");
}

TEST(BadInput, MissingShardAndIndexDisagreements) {
  TempDir dir;
  dir.Write("ckpt/model-00001-of-00002.safetensors",
            BuildFile({{"a.scale", "F8_E8M0", {4}}, {"extra.scale", "F8_E8M0", {4}}}));
  const std::string index = dir.Write("ckpt/model.safetensors.index.json", R"({"metadata":{},"weight_map":{
      "a.scale":"model-00001-of-00002.safetensors","b.scale":"model-00002-of-00002.safetensors",
      "c.scale":"model-00001-of-00002.safetensors"}})");
  const AuditResult result = RunAudit({dir.path() + "/ckpt"}, KeepGoing(true));
  EXPECT_EQ(ExitStatus(result), 2);
  ASSERT_EQ(result.errors.size(), 3u);
  for (const AuditError& error : result.errors) std::printf("  error: %s\n", error.message.c_str());
  // Shards in name order: 00001 (c.scale absent, extra.scale unindexed), then the missing 00002.
  ExpectError(result.errors[0], index, "c.scale", "the index puts it in");
  ExpectError(result.errors[1], dir.path() + "/ckpt/model-00001-of-00002.safetensors", "extra.scale", "not in the index");
  ExpectError(result.errors[2], index, "b.scale", "its shard \"model-00002-of-00002.safetensors\" is missing");
  EXPECT_NE(result.errors[2].message.find("is missing"), std::string::npos);

  const std::string escape = dir.Write("escape.safetensors.index.json", R"({"weight_map":{"a":"../x.safetensors"}})");
  ExpectError(OnlyError({escape}), escape, "a", "not a file name inside the index's folder");
  const std::string dup = dir.Write("dup.safetensors.index.json", R"({"weight_map":{"a":"x","a":"y"}})");
  ExpectError(OnlyError({dup}), dup, "a", "named twice");
}

TEST(BadInput, MissingPathsAndEmptyFolders) {
  TempDir dir;
  const std::string nothing = dir.path() + "/nothing.safetensors";
  ExpectError(OnlyError({nothing}), nothing, "", "no such file or folder");
  std::filesystem::create_directories(dir.path() + "/empty");
  ExpectError(OnlyError({dir.path() + "/empty"}), dir.path() + "/empty", "", "no *.safetensors file");
}

TEST(BadInput, DevicesAndFifosAreRefusedWithoutWaiting) {
  TempDir dir;
  const std::string fifo = dir.path() + "/pipe.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ExpectError(OnlyError({fifo}), fifo, "", "not a regular file");  // a blocking open would hang here
  ExpectError(OnlyError({"/dev/zero"}), "/dev/zero", "", "not a regular file");
}

TEST(BadInput, KeepGoingAuditsTheRestAndStillFails) {
  TempDir dir;
  const std::vector<uint8_t> good = BuildFile({{"layers.0.ffn.experts.0.w2.weight", "I8", {64, 16}},
                                               {"layers.0.ffn.experts.0.w2.scale", "F8_E8M0", {64, 1}}});
  const std::string first = dir.Write("a.safetensors", good);
  const std::string bad = dir.Write("b.safetensors", std::vector<uint8_t>{0, 1});
  const std::string last = dir.Write("c.safetensors", BuildFile({{"other.scale", "F8_E8M0", {4}}}));

  const AuditResult stopped = RunAudit({first, bad, last}, AuditOptions{});
  EXPECT_EQ(ExitStatus(stopped), 2);
  EXPECT_EQ(stopped.errors.size(), 1u);
  EXPECT_TRUE(stopped.plan.scales.empty());  // nothing audited after an error without --keep-going

  const AuditResult kept = RunAudit({first, bad, last}, KeepGoing(true));
  EXPECT_EQ(ExitStatus(kept), 2);
  ASSERT_EQ(kept.errors.size(), 1u);
  EXPECT_EQ(kept.errors[0].file, bad);
  ASSERT_EQ(kept.plan.scales.size(), 2u);
  for (const TensorScan& scan : kept.scan.tensors) EXPECT_TRUE(scan.scanned);
  ASSERT_EQ(kept.plan.layers.size(), 1u);
  EXPECT_TRUE(JudgeLayer(kept, kept.plan.layers[0]).admitted);
}

TEST(BadInput, AFileThatShrinksAfterItsHeaderWasReadIsAnErrorNotACrash) {
  TempDir dir;
  const std::string file = dir.Write("shrink.safetensors", BuildFile({{"a.scale", "F8_E8M0", {4096, 4}}}));
  Checkpoint checkpoint = LoadCheckpoint(std::vector<std::string>{file}, false);
  ASSERT_TRUE(checkpoint.errors.empty());
  std::filesystem::resize_file(file, 100);
  const MappedFiles source({file});
  const AuditResult result = AuditCheckpoint(std::move(checkpoint), source, AuditOptions{});
  EXPECT_EQ(ExitStatus(result), 2);
  ASSERT_EQ(result.errors.size(), 1u);
  ExpectError(result.errors[0], file, "a.scale", "shorter than when its header was read");
}

}  // namespace
}  // namespace mxdiff::checkpoint
