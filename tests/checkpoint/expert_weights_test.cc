// checkpoint/expert_weights.h: an MoE layer's experts read from safetensors files written here
// and sliced for tp = 1, 2, 4 and every rank, against a slicing computed independently from the
// arrays the test wrote (element by element); the CPU reference MoE layer runs on the result;
// bad input is refused with an error naming the file, tensor or value.
#include "checkpoint/expert_weights.h"

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "fmt/core.h"
#include "gtest/gtest.h"
#include "reference/checkpoint_scales.h"
#include "reference/moe_layer.h"
#include "tests/checkpoint/safetensors_builder.h"

namespace mxdiff::checkpoint {
namespace {

using checkpoint::testing::BuildFile;
using checkpoint::testing::TempDir;
using checkpoint::testing::TestTensor;

constexpr int kHidden = 64;
constexpr int kInter = 128;
constexpr int kExperts = 4;

// One expert's three projections as the checkpoint stores them (row-major, full size).
struct HostExpert {
  std::vector<uint8_t> w1, w3, w2;        // codes: [I, H/2], [I, H/2], [H, I/2]
  std::vector<uint8_t> s1, s3, s2;        // scales: [I, H/32], [I, H/32], [H, I/32]
};

std::vector<uint8_t> RandomBytes(std::mt19937& rng, size_t n, int lo, int hi) {
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<uint8_t> v(n);
  for (uint8_t& b : v) b = uint8_t(d(rng));
  return v;
}

HostExpert RandomExpert(std::mt19937& rng, int hidden = kHidden, int inter = kInter) {
  HostExpert e;
  e.w1 = RandomBytes(rng, size_t(inter) * hidden / 2, 0, 255);
  e.w3 = RandomBytes(rng, size_t(inter) * hidden / 2, 0, 255);
  e.w2 = RandomBytes(rng, size_t(hidden) * inter / 2, 0, 255);
  e.s1 = RandomBytes(rng, size_t(inter) * hidden / 32, kCheckpointScaleFirst, kCheckpointScaleLast);
  e.s3 = RandomBytes(rng, size_t(inter) * hidden / 32, kCheckpointScaleFirst, kCheckpointScaleLast);
  e.s2 = RandomBytes(rng, size_t(hidden) * inter / 32, kCheckpointScaleFirst, kCheckpointScaleLast);
  return e;
}

void AddExpert(std::vector<TestTensor>& out, const std::string& prefix, const HostExpert& e, int hidden = kHidden,
               int inter = kInter) {
  const auto add = [&](const std::string& name, const char* dtype, std::vector<uint64_t> shape,
                       const std::vector<uint8_t>& data) {
    out.emplace_back(prefix + name, dtype, std::move(shape));
    out.back().data = data;
  };
  const uint64_t h = uint64_t(hidden), i = uint64_t(inter);
  add(".w1.weight", "I8", {i, h / 2}, e.w1);
  add(".w1.scale", "F8_E8M0", {i, h / 32}, e.s1);
  add(".w2.weight", "I8", {h, i / 2}, e.w2);
  add(".w2.scale", "F8_E8M0", {h, i / 32}, e.s2);
  add(".w3.weight", "I8", {i, h / 2}, e.w3);
  add(".w3.scale", "F8_E8M0", {i, h / 32}, e.s3);
}

struct Fixture {
  TempDir dir;
  std::vector<HostExpert> experts;  // routed 0..E-1, then the shared one
  std::vector<std::string> paths;
};

// layers.1's experts over two files (0..1 in the first, the rest and the shared expert in the
// second), and a layers.0 of other bytes that must not be read.
void WriteCheckpoint(Fixture& f) {
  std::mt19937 rng(1234);
  for (int e = 0; e <= kExperts; ++e) f.experts.push_back(RandomExpert(rng));
  std::vector<TestTensor> a, b;
  AddExpert(a, "layers.0.ffn.experts.0", RandomExpert(rng));
  for (int e = 0; e < kExperts; ++e) AddExpert(e < 2 ? a : b, fmt::format("layers.1.ffn.experts.{}", e), f.experts[e]);
  AddExpert(b, "layers.1.ffn.shared_experts", f.experts[kExperts]);
  f.paths = {f.dir.Write("a.safetensors", BuildFile(a)), f.dir.Write("b.safetensors", BuildFile(b))};
}

TEST(ExpertWeights, SlicesEveryRankAsAnIndependentSlicing) {
  Fixture f;
  WriteCheckpoint(f);
  for (int tp : {1, 2, 4}) {
    const int inter = kInter / tp;
    for (int rank = 0; rank < tp; ++rank) {
      SCOPED_TRACE(fmt::format("tp={} rank={}", tp, rank));
      absl::StatusOr<MoeLayerWeights> w = LoadMoeLayerWeights(f.paths, "layers.1", {tp, rank});
      ASSERT_TRUE(w.ok()) << w.status();
      EXPECT_EQ(w->experts, kExperts);
      EXPECT_TRUE(w->shared_expert);
      EXPECT_EQ(w->hidden, kHidden);
      EXPECT_EQ(w->intermediate, inter);
      EXPECT_EQ(w->full_intermediate, kInter);
      const int groups = kExperts + 1;
      std::vector<uint8_t> w13c, w13s, w2c, w2s;  // the slicing by the definition, element by element
      for (int g = 0; g < groups; ++g) {
        const HostExpert& e = f.experts[g];
        for (int n = 0; n < 2 * inter; ++n) {
          const bool up = n >= inter;
          const int row = rank * inter + (up ? n - inter : n);
          for (int k = 0; k < kHidden / 2; ++k) w13c.push_back((up ? e.w3 : e.w1)[size_t(row) * (kHidden / 2) + k]);
          for (int k = 0; k < kHidden / 32; ++k) w13s.push_back((up ? e.s3 : e.s1)[size_t(row) * (kHidden / 32) + k]);
        }
        for (int h = 0; h < kHidden; ++h) {
          for (int k = 0; k < inter / 2; ++k) w2c.push_back(e.w2[size_t(h) * (kInter / 2) + rank * inter / 2 + k]);
          for (int k = 0; k < inter / 32; ++k) w2s.push_back(e.s2[size_t(h) * (kInter / 32) + rank * inter / 32 + k]);
        }
      }
      EXPECT_EQ(w->w13_codes, w13c);
      EXPECT_EQ(w->w13_scales, w13s);
      EXPECT_EQ(w->w2_codes, w2c);
      EXPECT_EQ(w->w2_scales, w2s);
    }
  }
}

// The CPU reference layer runs on a loaded layer; W13 is column-parallel, so rank r's gate and
// up outputs are bit for bit columns [r I/tp, (r+1) I/tp) of each half of the tp=1 layer's.
TEST(ExpertWeights, ReferenceMoeLayerRunsOnTheLoadedLayer) {
  Fixture f;
  WriteCheckpoint(f);
  constexpr int kTokens = 3, kTopK = 2, kTp = 2;
  std::mt19937 rng(7);
  std::vector<uint16_t> activations(size_t(kTokens) * kHidden);
  std::uniform_int_distribution<int> bits(0x2c00, 0x3c00);
  for (uint16_t& a : activations) a = uint16_t(bits(rng) | (rng() & 1 ? 0x8000 : 0));
  const std::vector<int32_t> ids = {0, 3, 1, 2, 3, 3};
  const std::vector<float> weights = {0.75f, 0.25f, 0.5f, 0.5f, 1.0f, 0.125f};
  const auto run = [&](const MoeLayerWeights& w) {
    MoeLayerProblem problem{.shape = w.shape(kTopK),
                            .routing = {kTokens, ids, weights},
                            .activations = activations,
                            .w13 = w.w13(),
                            .w2 = w.w2()};
    return ReferenceMoeLayer(problem, MoeLayerOptions{});
  };
  absl::StatusOr<MoeLayerWeights> full = LoadMoeLayerWeights(f.paths, "layers.1", {1, 0});
  ASSERT_TRUE(full.ok()) << full.status();
  absl::StatusOr<MoeLayerStages> whole = run(*full);
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_EQ(whole->output.size(), size_t(kTokens) * kHidden);
  for (int rank = 0; rank < kTp; ++rank) {
    absl::StatusOr<MoeLayerWeights> part = LoadMoeLayerWeights(f.paths, "layers.1", {kTp, rank});
    ASSERT_TRUE(part.ok()) << part.status();
    absl::StatusOr<MoeLayerStages> stages = run(*part);
    ASSERT_TRUE(stages.ok()) << stages.status();
    ASSERT_EQ(stages->output.size(), size_t(kTokens) * kHidden);
    ASSERT_EQ(stages->schedule.row_offsets, whole->schedule.row_offsets);
    const int rows = stages->schedule.rows(), inter = kInter / kTp;
    for (int r = 0; r < rows; ++r) {
      for (int n = 0; n < 2 * inter; ++n) {
        const int half = n / inter, column = half * kInter + rank * inter + n % inter;
        ASSERT_EQ(stages->w13[size_t(r) * 2 * inter + n], whole->w13[size_t(r) * 2 * kInter + column])
            << "row " << r << " column " << n << " of rank " << rank;
      }
    }
  }
}

std::string LoadError(const std::vector<std::string>& paths, const std::string& layer, TensorParallel p) {
  absl::StatusOr<MoeLayerWeights> w = LoadMoeLayerWeights(paths, layer, p);
  EXPECT_FALSE(w.ok());
  return w.ok() ? "" : std::string(w.status().message());
}

TEST(ExpertWeights, RefusesALayerNotInTheCheckpointTpAndRank) {
  Fixture f;
  WriteCheckpoint(f);
  absl::StatusOr<MoeLayerWeights> none = LoadMoeLayerWeights(f.paths, "layers.7", {1, 0});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("\"layers.7\""), std::string::npos) << none.status();
  EXPECT_NE(none.status().message().find("layers.0, layers.1"), std::string::npos) << none.status();
  EXPECT_NE(LoadError(f.paths, "layers.1", {3, 0}).find("tp=3 does not divide the intermediate size 128"),
            std::string::npos);
  EXPECT_NE(LoadError(f.paths, "layers.1", {8, 0}).find("128 / 8 = 16"), std::string::npos);
  EXPECT_NE(LoadError(f.paths, "layers.1", {8, 0}).find("32-element scale block"), std::string::npos);
  EXPECT_NE(LoadError(f.paths, "layers.1", {4, 4}).find("rank=4 is out of range for tp=4 (0..3)"), std::string::npos);
  EXPECT_NE(LoadError(f.paths, "layers.1", {2, -1}).find("rank=-1"), std::string::npos);
  EXPECT_NE(LoadError(f.paths, "layers.1", {0, 0}).find("tp=0"), std::string::npos);
}

// A checkpoint of one layer whose tensors the test changes before writing them.
std::string BrokenLayerError(const std::function<void(std::vector<TestTensor>&)>& change) {
  TempDir dir;
  std::mt19937 rng(99);
  std::vector<TestTensor> tensors;
  for (int e = 0; e < 3; ++e) AddExpert(tensors, fmt::format("layers.0.ffn.experts.{}", e), RandomExpert(rng));
  change(tensors);
  const std::string path = dir.Write("model.safetensors", BuildFile(tensors));
  const std::string message = LoadError({path}, "layers.0", {1, 0});
  EXPECT_NE(message.find("model.safetensors"), std::string::npos) << message;
  return message;
}

void Erase(std::vector<TestTensor>& tensors, const std::string& name) {
  std::erase_if(tensors, [&](const TestTensor& t) { return t.name == name; });
}

TEST(ExpertWeights, RefusesMissingTensorsAndShapeMismatches) {
  std::string m = BrokenLayerError([](auto& t) { Erase(t, "layers.0.ffn.experts.1.w3.weight"); });
  EXPECT_NE(m.find("\"layers.0.ffn.experts.1.w3.weight\" is missing"), std::string::npos) << m;
  m = BrokenLayerError([](auto& t) { Erase(t, "layers.0.ffn.experts.2.w1.scale"); });
  EXPECT_NE(m.find("\"layers.0.ffn.experts.2.w1.scale\" is missing"), std::string::npos) << m;
  // The last expert's w1 alone is missing: still found by its other tensors.
  m = BrokenLayerError([](auto& t) { Erase(t, "layers.0.ffn.experts.2.w1.weight"); });
  EXPECT_NE(m.find("\"layers.0.ffn.experts.2.w1.weight\" is missing"), std::string::npos) << m;
  // Expert 1 is of another size than expert 0.
  m = BrokenLayerError([](auto& t) {
    std::mt19937 rng(5);
    std::erase_if(t, [](const TestTensor& x) { return x.name.starts_with("layers.0.ffn.experts.1."); });
    AddExpert(t, "layers.0.ffn.experts.1", RandomExpert(rng, kHidden, 2 * kInter), kHidden, 2 * kInter);
  });
  EXPECT_NE(m.find("\"layers.0.ffn.experts.1.w1.weight\""), std::string::npos) << m;
  EXPECT_NE(m.find("holds 256 rows of K = 64, but \"layers.0.ffn.experts.0.w1.weight\" has 128 rows"),
            std::string::npos)
      << m;
  // A scale that does not match its weight.
  m = BrokenLayerError([](auto& t) {
    for (TestTensor& x : t) {
      if (x.name == "layers.0.ffn.experts.0.w2.scale") x = TestTensor(x.name, "F8_E8M0", {kHidden, kInter / 16});
    }
  });
  EXPECT_NE(m.find("\"layers.0.ffn.experts.0.w2.scale\": F8_E8M0 [64, 8] does not match its weight"),
            std::string::npos)
      << m;
  // w3 of another shape than w1 in one expert.
  m = BrokenLayerError([](auto& t) {
    for (TestTensor& x : t) {
      if (x.name == "layers.0.ffn.experts.0.w3.weight") x = TestTensor(x.name, "I8", {kInter / 2, kHidden / 2});
      if (x.name == "layers.0.ffn.experts.0.w3.scale") x = TestTensor(x.name, "F8_E8M0", {kInter / 2, kHidden / 32});
    }
  });
  EXPECT_NE(m.find("\"layers.0.ffn.experts.0.w3.weight\": holds 64 rows"), std::string::npos) << m;
  // A weight that is not packed codes.
  m = BrokenLayerError([](auto& t) {
    for (TestTensor& x : t) {
      if (x.name == "layers.0.ffn.experts.0.w2.weight") x = TestTensor(x.name, "F8_E4M3", {kHidden, kInter});
    }
  });
  EXPECT_NE(m.find("is F8_E4M3 [64, 128], not packed MXFP4 codes"), std::string::npos) << m;
}

// V4-Flash's shared expert is FP8: it is left out with a note, the routed experts load.
TEST(ExpertWeights, AnFp8SharedExpertIsNotLoaded) {
  TempDir dir;
  std::mt19937 rng(3);
  std::vector<TestTensor> tensors;
  for (int e = 0; e < 2; ++e) AddExpert(tensors, fmt::format("layers.0.ffn.experts.{}", e), RandomExpert(rng));
  for (const char* w : {"w1", "w3"}) {
    tensors.emplace_back(fmt::format("layers.0.ffn.shared_experts.{}.weight", w), "F8_E4M3",
                         std::vector<uint64_t>{kInter, kHidden});
  }
  tensors.emplace_back("layers.0.ffn.shared_experts.w2.weight", "F8_E4M3", std::vector<uint64_t>{kHidden, kInter});
  const std::string path = dir.Write("model.safetensors", BuildFile(tensors));
  absl::StatusOr<MoeLayerWeights> w = LoadMoeLayerWeights({path}, "layers.0", {2, 1});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_FALSE(w->shared_expert);
  EXPECT_EQ(w->groups(), 2);
  EXPECT_NE(w->shared_note.find("F8_E4M3, not packed MXFP4 codes"), std::string::npos) << w->shared_note;
  EXPECT_EQ(w->w13_codes.size(), size_t(2) * kInter * kHidden / 2);
}

// gpt-oss's fused experts are named as such, not "not found".
TEST(ExpertWeights, GptOssExpertsAreRefusedByName) {
  TempDir dir;
  std::vector<TestTensor> tensors;
  tensors.emplace_back("model.layers.0.mlp.experts.gate_up_proj_blocks", "U8", std::vector<uint64_t>{2, 64, 2, 16});
  tensors.emplace_back("model.layers.0.mlp.experts.gate_up_proj_scales", "U8", std::vector<uint64_t>{2, 64, 2});
  const std::string path = dir.Write("gptoss.safetensors", BuildFile(tensors));
  absl::StatusOr<MoeLayerWeights> w = LoadMoeLayerWeights({path}, "model.layers.0", {1, 0});
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(w.status().message().find("gptoss.safetensors: \"model.layers.0\" holds gpt-oss experts"),
            std::string::npos)
      << w.status();
}

}  // namespace
}  // namespace mxdiff::checkpoint
