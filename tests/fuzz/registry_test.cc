// The fuzz target registry (fuzz/driver/fuzz_target.h): every registered target has every part, the
// registry and fuzz/targets.txt name the same targets, and a toy target (defined here, not
// shipped) shows that a target is one definition and one registration line.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz/driver/fuzz_target.h"
#include "gtest/gtest.h"

namespace fs = std::filesystem;

namespace {

std::string ReadText(const fs::path& file) {
  std::ifstream in(file);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// "NAME KIND" per line of fuzz/targets.txt (comments and blank lines skipped).
std::vector<std::string> TargetsTxt(const fs::path& root) {
  std::istringstream in(ReadText(root / "fuzz" / "targets.txt"));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.front() != '#') lines.push_back(line);
  }
  return lines;
}

// What `target` lacks under the source tree `root`, one entry per missing part.
std::vector<std::string> MissingParts(const mxdiff::fuzz::FuzzTarget& target, const fs::path& root) {
  std::vector<std::string> missing;
  if (target.format.empty() || target.decode == nullptr || target.describe == nullptr) missing.push_back("codec");
  if (target.check == nullptr || target.check_names.empty()) missing.push_back("a named check");
  if (target.repro.open == nullptr || target.repro.emit == nullptr || mxdiff::fuzz::CasesName(target).empty()) {
    missing.push_back("repro's parts (a session, --emit's destination, the cases' name)");
  }
  if (target.options.kind != "cpu" && target.options.kind != "gpu") missing.push_back("kind cpu|gpu");
  const fs::path corpus = root / "corpus" / std::string(target.name);
  const bool seeds = fs::is_directory(corpus) && !fs::is_empty(corpus);
  if (target.seed_writer.empty() || !seeds) missing.push_back("a seed writer and its seeds in " + corpus.string());
  const std::string options = ReadText(root / "fuzz" / "options" / (std::string(target.name) + ".options"));
  if (options.find("max_len = " + std::to_string(target.options.max_len) + "\n") == std::string::npos) {
    missing.push_back("fuzz/options/" + std::string(target.name) + ".options with max_len = " +
                      std::to_string(target.options.max_len));
  }
  if (!target.options.dictionary.empty() &&
      (options.find("dict = " + std::string(target.options.dictionary) + "\n") == std::string::npos ||
       !fs::exists(root / "fuzz" / "dictionaries" / std::string(target.options.dictionary)))) {
    missing.push_back("the dictionary " + std::string(target.options.dictionary));
  }
  if (seeds) {
    for (const auto& entry : fs::directory_iterator(corpus)) {
      std::ifstream in(entry.path(), std::ios::binary);
      const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (entry.path().filename() == "README.md") continue;
      if (target.decode != nullptr && !target.decode(bytes).ok()) {
        missing.push_back("a seed its codec decodes: " + entry.path().string());
      }

    }
  }
  return missing;
}

TEST(FuzzRegistry, EqualsTargetsTxt) {
  std::vector<std::string> registered;
  for (const mxdiff::fuzz::FuzzTarget* target : mxdiff::fuzz::Registry()) {
    registered.push_back(std::string(target->name) + " " + std::string(target->options.kind));
  }
  EXPECT_EQ(registered, TargetsTxt(MXDIFF_SOURCE_DIR))
      << "the registry (generated from fuzz/targets.txt) and fuzz/targets.txt must list the same targets, "
         "kinds and order: a target's file must say the kind its line says";
}

TEST(FuzzRegistry, EveryTargetHasEveryPart) {
  for (const mxdiff::fuzz::FuzzTarget* target : mxdiff::fuzz::Registry()) {
    for (const std::string& part : MissingParts(*target, MXDIFF_SOURCE_DIR)) {
      ADD_FAILURE() << target->name << " lacks " << part;
    }
  }
}

// repro reaches a target through its format's first target only: every target of a format must
// have that one's codec magic and repro parts, or repro would treat its cases as the first one's.
TEST(FuzzRegistry, TargetsOfOneFormatAgreeOnReproParts) {
  for (const mxdiff::fuzz::FuzzTarget* target : mxdiff::fuzz::Registry()) {
    const mxdiff::fuzz::FuzzTarget& head = mxdiff::fuzz::FormatHead(*target);
    EXPECT_EQ(target->magic, head.magic) << target->name << " and " << head.name;
    EXPECT_EQ(target->repro.cases, head.repro.cases) << target->name << " and " << head.name;
    EXPECT_EQ(target->repro.open, head.repro.open) << target->name << " and " << head.name;
    EXPECT_EQ(target->repro.emit, head.repro.emit) << target->name << " and " << head.name;
    EXPECT_EQ(target->repro.minimize, head.repro.minimize) << target->name << " and " << head.name;
    EXPECT_EQ(target->repro.json, head.repro.json) << target->name << " and " << head.name;
  }
}

// repro picks a finding file's target by its codec's magic, else by its name
// <target>.<signature>.<hash>.case: every seed of every target, so named, goes to its own format.
TEST(FuzzRegistry, ReproFindsEveryTargetsFindings) {
  for (const mxdiff::fuzz::FuzzTarget* target : mxdiff::fuzz::Registry()) {
    const fs::path corpus = fs::path(MXDIFF_SOURCE_DIR) / "corpus" / std::string(target->name);
    for (const auto& entry : fs::directory_iterator(corpus)) {
      if (entry.path().filename() == "README.md") continue;
      std::ifstream in(entry.path(), std::ios::binary);
      const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      const mxdiff::fuzz::FuzzTarget& chosen = mxdiff::fuzz::TargetOfInput(std::string(target->name) + ".x.0.case", bytes);
      EXPECT_EQ(chosen.format, target->format) << entry.path() << " as a finding goes to " << chosen.name;
    }
  }
}

// What repro does with a seed of every registered target, through the registry alone: its codec
// accepts it, its session explains it (the text into a scratch file) and replays it.
TEST(FuzzRegistry, ReproExplainsASeedOfEveryTarget) {
  std::FILE* scratch = std::tmpfile();
  ASSERT_NE(scratch, nullptr);
  for (const mxdiff::fuzz::FuzzTarget* target : mxdiff::fuzz::Registry()) {
    const fs::path corpus = fs::path(MXDIFF_SOURCE_DIR) / "corpus" / std::string(target->name);
    fs::path seed;
    for (const auto& entry : fs::directory_iterator(corpus)) {
      if (entry.path().filename() != "README.md" && (seed.empty() || entry.path() < seed)) seed = entry.path();
    }
    ASSERT_FALSE(seed.empty()) << target->name;
    std::ifstream in(seed, std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string file_name = std::string(target->name) + ".x.0.case";
    const mxdiff::fuzz::FuzzTarget& chosen = mxdiff::fuzz::TargetOfInput(file_name, bytes);
    ASSERT_TRUE(chosen.decode != nullptr && chosen.decode(bytes).ok()) << seed;
    ASSERT_NE(chosen.repro.open, nullptr) << target->name << " has no repro session";
    const std::unique_ptr<mxdiff::fuzz::ReproSession> session = chosen.repro.open(chosen, {.text = scratch});
    ASSERT_NE(session, nullptr) << target->name;
    const absl::StatusOr<std::vector<mxdiff::fuzz::TargetFinding>> explained = session->Explain(file_name, bytes);
    EXPECT_TRUE(explained.ok()) << target->name << ": " << explained.status();
    ASSERT_TRUE(session->StartSequence().ok()) << target->name;
    // A replay finds what the explanation found, less the session's own (a device matching no model).
    std::vector<std::string> found, again;
    for (const mxdiff::fuzz::TargetFinding& f : session->Replay(bytes)) again.push_back(f.finding.signature);
    for (const mxdiff::fuzz::TargetFinding& f : explained.value_or(std::vector<mxdiff::fuzz::TargetFinding>{})) {
      bool of_session = false;
      for (const mxdiff::fuzz::TargetFinding& s : session->SessionFindings()) {
        of_session = of_session || s.finding.signature == f.finding.signature;
      }
      if (!of_session) found.push_back(f.finding.signature);
    }
    EXPECT_EQ(again, found) << target->name << " on " << seed;
  }
  std::fclose(scratch);
}

TEST(FuzzRegistry, FindsTargetsByNameAndFileName) {
  ASSERT_NE(mxdiff::fuzz::FindTarget("fuzz_reference"), nullptr);
  EXPECT_EQ(mxdiff::fuzz::TargetOfFileName("fuzz_reference.reference-x.0123.case"),
            mxdiff::fuzz::FindTarget("fuzz_reference"));
  EXPECT_EQ(mxdiff::fuzz::TargetOfFileName("fuzz_nothing.x.case"), nullptr);
}

// The toy target: its whole definition.
using mxdiff::fuzz::CheckResult;
CheckResult ToyNotAllZero(const std::vector<uint8_t>& bytes) {
  for (uint8_t b : bytes) {
    if (b != 0) return std::nullopt;
  }
  return mxdiff::fuzz::Finding{"toy/all-zero", "every byte is zero"};
}
CheckResult ToyNotLong(const std::vector<uint8_t>& bytes) {
  if (bytes.size() <= 8) return std::nullopt;
  return mxdiff::fuzz::Finding{"toy/long", "more than 8 bytes"};
}
constexpr mxdiff::fuzz::NamedCheck<std::vector<uint8_t>> kToyChecks[] = {{"not-all-zero", ToyNotAllZero},
                                                                        {"not-long", ToyNotLong}};

MXDIFF_FUZZ_TARGET(fuzz_toy) {
  return mxdiff::fuzz::FuzzTarget{
      .name = "fuzz_toy",
      .options = {.kind = "cpu", .max_len = 16},
      .format = "toy",
      .decode = [](std::span<const uint8_t> input) {
        return input.empty() ? absl::InvalidArgumentError("not a toy case: empty") : absl::OkStatus();
      },
      .describe = [](std::span<const uint8_t> input) { return std::to_string(input.size()) + " bytes"; },
      .check_names = mxdiff::fuzz::CheckNamesOf(kToyChecks),
      .check = [](std::span<const uint8_t> input, bool) -> mxdiff::fuzz::InputFindings {
        if (input.empty()) return std::nullopt;
        return mxdiff::fuzz::RunNamedChecks<std::vector<uint8_t>>(kToyChecks, {input.begin(), input.end()});
      },
      .seed_writer = "committed",
  };
}

// A registry with the toy in it: the one registration line.
const mxdiff::fuzz::FuzzTarget* const kToyRegistry[] = {&MxdiffFuzzTarget_fuzz_toy()};

// A source tree holding the toy's other parts: its seeds and its options file.
fs::path ToyTree() {
  const fs::path root = fs::temp_directory_path() / ("mxdiff-registry-test-" + std::to_string(getpid()));
  fs::create_directories(root / "corpus" / "fuzz_toy");
  fs::create_directories(root / "fuzz" / "options");
  std::ofstream(root / "corpus" / "fuzz_toy" / "seed") << "toy";
  std::ofstream(root / "fuzz" / "options" / "fuzz_toy.options") << "[libfuzzer]\nmax_len = 16\n";
  return root;
}

TEST(FuzzRegistry, ToyTargetIsOneDefinitionAndOneLine) {
  const fs::path root = ToyTree();
  const mxdiff::fuzz::FuzzTarget& toy = *kToyRegistry[0];
  EXPECT_TRUE(MissingParts(toy, root).empty());
  const uint8_t clean[] = {1, 2};
  EXPECT_EQ(mxdiff::fuzz::RunTargetInput(toy, clean, sizeof clean), 0);
  EXPECT_EQ(mxdiff::fuzz::RunTargetInput(toy, clean, 0), -1) << "an input its codec refuses stays out of the corpus";
  // Every check runs and each finding is kept; the driver's finding is the first, naming the others.
  const std::vector<uint8_t> zeros(9, 0);
  const mxdiff::fuzz::InputFindings findings = toy.check(zeros, false);
  ASSERT_TRUE(findings && findings->size() == 2);
  const CheckResult first = mxdiff::fuzz::FirstFindingOf(*findings);
  EXPECT_EQ(first->signature, "toy/all-zero");
  EXPECT_NE(first->description.find("also: toy/long"), std::string::npos);
  // repro reaches it with no edit of its own: the default session runs every check.
  EXPECT_EQ(toy.decode(std::span<const uint8_t>()).message(), "not a toy case: empty");
  std::FILE* scratch = std::tmpfile();
  const std::unique_ptr<mxdiff::fuzz::ReproSession> session = toy.repro.open(toy, {.text = scratch});
  const absl::StatusOr<std::vector<mxdiff::fuzz::TargetFinding>> explained = session->Explain("zeros", zeros);
  std::fclose(scratch);
  ASSERT_TRUE(explained.ok());
  ASSERT_EQ(explained->size(), 2u);
  EXPECT_EQ((*explained)[0].target, "fuzz_toy");
  EXPECT_EQ((*explained)[1].finding.signature, "toy/long");
  EXPECT_FALSE(toy.repro.minimize) << "repro refuses --minimize on its cases";
  EXPECT_FALSE(session->Minimize("zeros", (*explained)[0]).ok());
  fs::remove_all(root);
}

// A toy CPU target of the case format (fuzz_reference, fuzz_transform and fuzz_dispatch have this
// shape): its checks, then its whole definition, one statement.
CheckResult ToyCaseHasGroups(const mxdiff::fuzz::FuzzCase& c) {
  if (c.groups >= 1) return std::nullopt;
  return mxdiff::fuzz::Finding{"toy-case/no-groups", "no groups"};
}
constexpr mxdiff::fuzz::NamedCheck<mxdiff::fuzz::FuzzCase> kToyCaseChecks[] = {{"has-groups", ToyCaseHasGroups}};
std::vector<std::string_view> ToyCaseCheckNames() { return mxdiff::fuzz::CheckNamesOf(kToyCaseChecks); }
std::vector<mxdiff::fuzz::Finding> ToyCaseFindings(const mxdiff::fuzz::FuzzCase& c) {
  return mxdiff::fuzz::RunNamedChecks<mxdiff::fuzz::FuzzCase>(kToyCaseChecks, c);
}

MXDIFF_FUZZ_TARGET(fuzz_toy_case) {
  using namespace mxdiff::fuzz;
  return CaseChecksTarget<kDispatchProfile, ToyCaseCheckNames, ToyCaseFindings>("fuzz_toy_case", 2048);
}

TEST(FuzzRegistry, ToyCaseTargetIsOneStatementWithEveryPart) {
  const fs::path root = ToyTree();
  const fs::path source = MXDIFF_SOURCE_DIR;
  fs::create_directories(root / "corpus" / "fuzz_toy_case");
  fs::create_directories(root / "fuzz" / "dictionaries");
  fs::copy_file(source / "fuzz" / "dictionaries" / "mxdiff.dict", root / "fuzz" / "dictionaries" / "mxdiff.dict");
  const fs::path seed = fs::directory_iterator(source / "corpus" / "fuzz_dispatch")->path();
  fs::copy_file(seed, root / "corpus" / "fuzz_toy_case" / "seed");
  const mxdiff::fuzz::FuzzTarget& toy = MxdiffFuzzTarget_fuzz_toy_case();
  EXPECT_EQ(MissingParts(toy, root), (std::vector<std::string>{"fuzz/options/fuzz_toy_case.options with max_len = 2048",
                                                               "the dictionary mxdiff.dict"}));
  std::ofstream(root / "fuzz" / "options" / "fuzz_toy_case.options")
      << "[libfuzzer]\nmax_len = 2048\ndict = mxdiff.dict\n";
  EXPECT_TRUE(MissingParts(toy, root).empty());
  EXPECT_EQ(toy.check_names, std::vector<std::string_view>{"has-groups"});
  EXPECT_EQ(toy.format, "case");
  std::ifstream in(seed, std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const mxdiff::fuzz::InputFindings findings = toy.check(bytes, /*fresh=*/true);
  ASSERT_TRUE(findings.has_value()) << "a corpus case decodes";
  EXPECT_TRUE(findings->empty());
  EXPECT_NE(toy.mutate, nullptr) << "the case format's structured mutator";
  fs::remove_all(root);
}

TEST(FuzzRegistry, ATargetLackingAPartFails) {
  const fs::path root = ToyTree();
  mxdiff::fuzz::FuzzTarget broken = MxdiffFuzzTarget_fuzz_toy();
  broken.check_names.clear();
  EXPECT_EQ(MissingParts(broken, root), std::vector<std::string>{"a named check"});
  broken = MxdiffFuzzTarget_fuzz_toy();
  broken.decode = nullptr;
  EXPECT_EQ(MissingParts(broken, root), std::vector<std::string>{"codec"});
  const std::vector<std::string> no_repro{"repro's parts (a session, --emit's destination, the cases' name)"};
  broken = MxdiffFuzzTarget_fuzz_toy();
  broken.repro.open = nullptr;
  EXPECT_EQ(MissingParts(broken, root), no_repro);
  broken = MxdiffFuzzTarget_fuzz_toy();
  broken.repro.emit = nullptr;
  EXPECT_EQ(MissingParts(broken, root), no_repro);
  broken = MxdiffFuzzTarget_fuzz_toy();
  broken.options.max_len = 17;
  EXPECT_EQ(MissingParts(broken, root).size(), 1u);
  fs::remove_all(root / "corpus" / "fuzz_toy");
  EXPECT_EQ(MissingParts(MxdiffFuzzTarget_fuzz_toy(), root).size(), 1u) << "no seeds";
  fs::remove_all(root);
}

}  // namespace
