// Writes the structured seed corpus of every fuzz target into OUT/<target>/ through the case
// encoder: each route (the four reasons and both fail-closed errors), each scale-byte class
// (a = 0, 1..16, 17, 18..29, 30 and the NaN byte), the plan shapes (one split, several,
// clamped, partial last chunk), every step model, fp16 specials, and the decode shapes of the
// builtin kernels. The seeds are then minimized into corpus/ with libFuzzer's -merge=1
// (corpus/README.md). Deterministic: the same binary writes the same files.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "fmt/core.h"
#include "fuzz/case_format.h"
#include "fuzz/case_mutator.h"
#include "fuzz/target_driver.h"

namespace {

using mxdiff::Tactic;
using mxdiff::Transform;
using mxdiff::TransformRequest;
using mxdiff::FallbackPolicy;
using mxdiff::StepModel;
using mxdiff::fuzz::FuzzCase;

constexpr uint8_t kClassBytes[] = {0, 112, 113, 120, 127, 128, 129, 135, 142, 200, 254, 255};

class SeedWriter {
 public:
  explicit SeedWriter(std::filesystem::path root) : root_(std::move(root)) {}

  bool Write(const std::string& target, const std::string& label, const FuzzCase& c) {
    absl::StatusOr<std::vector<uint8_t>> bytes = mxdiff::fuzz::EncodeCase(c);
    if (!bytes.ok()) {
      fmt::print(stderr, "seed {}/{} is invalid: {}\n", target, label, bytes.status().ToString());
      return ok_ = false;
    }
    std::filesystem::create_directories(root_ / target);
    std::ofstream out(root_ / target / (label + ".case"), std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes->data()), std::streamsize(bytes->size()));
    ++written_;
    return ok_ = ok_ && bool(out);
  }
  bool ok() const { return ok_; }
  int written() const { return written_; }

 private:
  std::filesystem::path root_;
  bool ok_ = true;
  int written_ = 0;
};

FuzzCase Shaped(mxdiff::fuzz::CaseRng& rng, int groups, std::vector<int> rows, int n, int k, uint8_t scale_fill) {
  FuzzCase c;
  mxdiff::fuzz::ResizeCase(c, groups, n, k, rows);
  for (uint16_t& a : c.activations) a = uint16_t((rng() & 0x8000) | ((10 + rng() % 10) << 10) | (rng() & 0x3FF));
  for (uint8_t& byte : c.packed_codes) byte = uint8_t(rng());
  for (uint8_t& raw : c.scale_bytes) raw = scale_fill != 0xFE ? scale_fill : uint8_t(113 + rng() % 16);
  c.registry = {{c.tactic, Transform::kOrdinary}, {c.tactic, Transform::kFolded}};
  return c;
}

void TransformSeeds(SeedWriter& out, mxdiff::fuzz::CaseRng& rng) {
  for (uint8_t raw : kClassBytes) {
    FuzzCase c = Shaped(rng, 1, {1}, 4, 32, raw);
    c.request = TransformRequest::kAuto;
    out.Write("fuzz_transform", fmt::format("class-raw{}", raw), c);
  }
  for (int part = 0; part < 8; ++part) {  // all 256 scale bytes, 32 per case
    FuzzCase c = Shaped(rng, 2, {1, 0}, 8, 64, 0);
    for (size_t i = 0; i < c.scale_bytes.size(); ++i) c.scale_bytes[i] = uint8_t(part * 32 + int(i));
    c.request = TransformRequest(part % 3);
    out.Write("fuzz_transform", fmt::format("all-bytes-{}", part), c);
  }
  FuzzCase admitted = Shaped(rng, 1, {1}, 8, 64, 0xFE);
  admitted.request = TransformRequest::kFolded;
  out.Write("fuzz_transform", "admitted-folded", admitted);
}

void DispatchSeeds(SeedWriter& out, mxdiff::fuzz::CaseRng& rng) {
  const uint8_t layers[] = {120, 112, 129, 255};  // admitted, then refused classes
  for (uint8_t raw : layers) {
    for (int request = 0; request < 3; ++request) {
      for (int policy = 0; policy < 2; ++policy) {
        for (int registry = 0; registry < 4; ++registry) {
          FuzzCase c = Shaped(rng, 1, {1}, 2, 32, raw);
          c.tactic = Tactic{16, 128, 32, 1 + registry, 0};
          c.request = TransformRequest(request);
          c.policy = FallbackPolicy(policy);
          c.registry.clear();
          if (registry != 3) c.registry.push_back({c.tactic, Transform::kOrdinary});  // 3: nothing launches
          if (registry == 0) c.registry.push_back({c.tactic, Transform::kFolded});
          if (registry == 2) c.registry.push_back({Tactic{32, 128, 32, 1, 0}, Transform::kFolded});  // near miss
          out.Write("fuzz_dispatch", fmt::format("raw{}-{}-{}-registry{}", raw,
                                                 mxdiff::TransformRequestName(c.request),
                                                 mxdiff::FallbackPolicyName(c.policy), registry),
                    c);
        }
      }
    }
  }
}

void ReferenceSeeds(SeedWriter& out, mxdiff::fuzz::CaseRng& rng) {
  const int cta_ks[] = {4, 12, 32, 64, 256};
  const int splits[] = {1, 2, 3, 256};
  for (int model = 0; model < mxdiff::kStepModelCount; ++model) {
    for (int cta_k : cta_ks) {
      for (int s : splits) {
        FuzzCase c = Shaped(rng, 2, {1, 2}, 4, 128, 0xFE);
        c.model = StepModel(model);
        c.tactic = Tactic{16, 128, cta_k, s, 0};
        c.request = s == 2 ? TransformRequest::kFolded : TransformRequest::kOrdinary;
        out.Write("fuzz_reference", fmt::format("{}-k{}-s{}", mxdiff::StepModelName(c.model), cta_k, s), c);
      }
    }
    FuzzCase specials = Shaped(rng, 1, {2}, 8, 64, 0xFE);
    specials.model = StepModel(model);
    for (size_t i = 0; i < specials.activations.size(); ++i) {
      specials.activations[i] = mxdiff::fuzz::kInterestingF16[i % std::size(mxdiff::fuzz::kInterestingF16)];
    }
    out.Write("fuzz_reference", fmt::format("{}-specials", mxdiff::StepModelName(specials.model)), specials);
    FuzzCase refused = Shaped(rng, 1, {1}, 4, 96, 0);
    for (size_t i = 0; i < refused.scale_bytes.size(); ++i) refused.scale_bytes[i] = kClassBytes[i % 12];
    refused.model = StepModel(model);
    refused.request = TransformRequest::kFolded;
    refused.tactic.cta_k = 64;  // K = 96: a partial last chunk
    refused.tactic.splits = 2;
    out.Write("fuzz_reference", fmt::format("{}-refused-folded-partial", mxdiff::StepModelName(refused.model)),
              refused);
  }
}

void GemmSeeds(SeedWriter& out, mxdiff::fuzz::CaseRng& rng) {
  const Tactic builtin[] = {{8, 128, 64, 1, 0}, {16, 128, 32, 1, 0}, {32, 128, 32, 1, 0}, {64, 128, 32, 1, 0}};
  int index = 0;
  for (Tactic tactic : builtin) {
    for (int s : {1, 3}) {
      for (uint8_t raw : {uint8_t(0xFE), uint8_t(112), uint8_t(129)}) {
        FuzzCase c = Shaped(rng, 3, {1, 2, 0}, 64, 128, raw);  // decode: a row or two per expert
        tactic.splits = s;
        c.tactic = tactic;
        c.request = TransformRequest(index % 3);
        c.policy = FallbackPolicy(index / 3 % 2);
        out.Write("fuzz_gemm", fmt::format("{}x{}x{}-s{}-raw{}", tactic.cta_m, tactic.cta_n, tactic.cta_k, s,
                                           raw == 0xFE ? std::string("admitted") : std::to_string(raw)),
                  c);
        ++index;
      }
    }
  }
  FuzzCase specials = Shaped(rng, 2, {2, 2}, 16, 64, 0xFE);
  for (size_t i = 0; i < specials.activations.size(); ++i) {
    specials.activations[i] = mxdiff::fuzz::kInterestingF16[i % std::size(mxdiff::fuzz::kInterestingF16)];
  }
  out.Write("fuzz_gemm", "specials", specials);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fmt::print(stderr, "usage: {} OUT_DIR\n  writes OUT_DIR/<target>/*.case seeds for every fuzz target\n", argv[0]);
    return 2;
  }
  SeedWriter out(argv[1]);
  mxdiff::fuzz::CaseRng rng(4);
  TransformSeeds(out, rng);
  DispatchSeeds(out, rng);
  ReferenceSeeds(out, rng);
  GemmSeeds(out, rng);
  fmt::print("wrote {} seeds under {}\n", out.written(), argv[1]);
  return out.ok() ? 0 : 1;
}
