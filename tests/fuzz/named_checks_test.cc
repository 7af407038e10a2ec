// fuzz_transform's and fuzz_dispatch's named checks: every one runs on a case and every finding is kept.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fuzz/checks/dispatch_target.h"
#include "fuzz/checks/transform_target.h"
#include "fuzz/formats/case_format.h"

namespace mxdiff::fuzz {
namespace {

// The cases of corpus/<target>/, decoded and materialized, in the order of their names.
std::vector<FuzzCase> CorpusCases(const std::string& target) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(MXDIFF_CORPUS_DIR) + "/" + target)) {
    files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<FuzzCase> cases;
  for (const std::filesystem::path& file : files) {
    std::ifstream stream(file, std::ios::binary);
    const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(stream), std::istreambuf_iterator<char>()};
    absl::StatusOr<FuzzCase> c = DecodeCase(bytes);
    if (!c.ok()) continue;
    MaterializeCase(*c);
    cases.push_back(*std::move(c));
  }
  return cases;
}

std::vector<std::string> Signatures(const std::vector<Finding>& findings) {
  std::vector<std::string> signatures;
  for (const Finding& finding : findings) signatures.push_back(finding.signature);
  return signatures;
}

TEST(NamedChecks, TransformKeepsTheFindingsOfTwoBrokenChecks) {
  const std::vector<FuzzCase> cases = CorpusCases("fuzz_transform");
  ASSERT_FALSE(cases.empty());
  const FuzzCase& c = cases.front();
  EXPECT_EQ(TransformCheckNames(),
            (std::vector<std::string_view>{"scale-bytes", "nibble-order", "dequantize-word", "layer-admission", "route"}));
  EXPECT_TRUE(TransformFindings(c).empty());
  PlantTransformChecksForTest({"nibble-order", "route"});
  const std::vector<Finding> findings = TransformFindings(c);
  PlantTransformChecksForTest({});
  EXPECT_EQ(Signatures(findings), (std::vector<std::string>{"transform/planted/nibble-order", "transform/planted/route"}));
}

// A route DecideRoute never gives, read by the real checks: folded, for a layer refused and a
// request for ordinary, on another tactic, with no folded kernel in the registry.
TEST(NamedChecks, DispatchKeepsTheFindingsOfEveryBrokenCheck) {
  // A corpus case whose ordinary kernel exists, asking for ordinary on a refused layer (raw 0).
  std::vector<FuzzCase> cases = CorpusCases("fuzz_dispatch");
  auto usable = std::find_if(cases.begin(), cases.end(), [](FuzzCase& c) {
    c.request = TransformRequest::kOrdinary;
    c.scale_bytes.assign(c.scale_bytes.size(), 0);
    return !c.scale_bytes.empty() && DecideDispatch(c).route.ok();
  });
  ASSERT_NE(usable, cases.end());
  const FuzzCase& c = *usable;
  DispatchRun run = DecideDispatch(c);
  EXPECT_TRUE(DispatchFindings(run).empty());
  ASSERT_FALSE(run.admission.admitted);
  Tactic other = c.tactic;
  other.splits += 1;
  run.route = Route{.variant = Transform::kFolded, .tactic = other, .reason = RouteReason::kFoldedAdmitted};
  run.registry = KernelRegistry();
  EXPECT_EQ(Signatures(DispatchFindings(run)),
            (std::vector<std::string>{"no-launch/folded/folded-admitted", "route/tactic-not-mirrored",
                                      "route/folded-on-refused", "route/folded-not-requested",
                                      "route/folded-admitted-instead-of-ordinary-requested"}));
  EXPECT_EQ(DispatchCheckNames().size(), 8u);
}

}  // namespace
}  // namespace mxdiff::fuzz
