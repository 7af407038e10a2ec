// checkpoint/model_config.h: the top-k from the config.json beside a checkpoint; a config.json
// that is there but broken is named with its problem (never "no config.json"), and the top-k
// used is said.
#include "checkpoint/model_config.h"

#include <string>

#include "gtest/gtest.h"
#include "tests/checkpoint/safetensors_builder.h"

namespace mxdiff::checkpoint {
namespace {

using checkpoint::testing::TempDir;

ModelTopK WithConfig(const TempDir& dir, const std::string& text, int experts = 8) {
  const std::string config = dir.Write("config.json", text);
  const std::string shard = dir.Write("model.safetensors", std::string("not read here"));
  // Both ways of naming the checkpoint: its folder and a file in it.
  const ModelTopK by_folder = ReadModelTopK({dir.path()}, experts);
  const ModelTopK by_file = ReadModelTopK({shard}, experts);
  EXPECT_EQ(by_folder.top_k, by_file.top_k);
  EXPECT_EQ(by_folder.source, by_file.source);
  return by_folder;
}

TEST(ModelTopK, ConfiguredMissingAndClamped) {
  const TempDir dir;
  const ModelTopK configured = WithConfig(dir, R"({"num_experts_per_tok": 2, "hidden_size": 4096})");
  EXPECT_EQ(configured.top_k, 2);
  EXPECT_EQ(configured.source, "config.json num_experts_per_tok = 2");
  const ModelTopK above = WithConfig(dir, R"({"num_experts_per_tok": 300})");
  EXPECT_EQ(above.top_k, 8);
  EXPECT_NE(above.source.find("= 300, outside 1..8"), std::string::npos) << above.source;
  const TempDir empty;
  const ModelTopK none = ReadModelTopK({empty.path()}, 8);
  EXPECT_EQ(none.top_k, 6);
  EXPECT_EQ(none.source, "DeepSeek V4's top-6 (no config.json beside the checkpoint)");
}

TEST(ModelTopK, ABrokenConfigIsNamedWithItsProblem) {
  const TempDir dir;
  const std::string path = dir.path() + "/config.json";
  struct Broken {
    std::string text;
    std::string problem;
  };
  for (const Broken& broken : {Broken{"{\"num_experts_per_tok\": 2", path + ": invalid JSON: "},
                               Broken{"[2]", path + " is not a JSON object"},
                               Broken{R"({"hidden_size": 4096})", path + " has no num_experts_per_tok"},
                               Broken{R"({"num_experts_per_tok": "2"})",
                                      path + ": num_experts_per_tok is \"\\\"2\\\"\", not an integer"},
                               Broken{R"({"num_experts_per_tok": 2.5})",
                                      path + ": num_experts_per_tok is \"2.5\", not an integer"}}) {
    const ModelTopK top_k = WithConfig(dir, broken.text);
    EXPECT_EQ(top_k.top_k, 6) << broken.text;
    EXPECT_TRUE(top_k.source.starts_with(broken.problem)) << broken.text << "\n" << top_k.source;
    EXPECT_TRUE(top_k.source.ends_with(": DeepSeek V4's top-6 is used")) << top_k.source;
    EXPECT_EQ(top_k.source.find("no config.json"), std::string::npos) << top_k.source;
  }
}

}  // namespace
}  // namespace mxdiff::checkpoint
