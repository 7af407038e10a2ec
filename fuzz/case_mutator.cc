#include "fuzz/case_mutator.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "reference/split_plan.h"

namespace mxdiff::fuzz {
namespace {

int Uniform(CaseRng& rng, int low, int high) {  // inclusive
  return low + int(rng() % uint64_t(high - low + 1));
}
bool OneIn(CaseRng& rng, int n) { return rng() % uint64_t(n) == 0; }

template <typename T, size_t N>
T Pick(CaseRng& rng, const T (&values)[N]) {
  return values[rng() % N];
}

// A finite fp16 of moderate magnitude (2^-6 .. 2^5): sums stay well inside fp32 so the
// interesting differences are rounding, not overflow.
uint16_t OrdinaryF16(CaseRng& rng) {
  const uint16_t sign = OneIn(rng, 2) ? 0x8000 : 0;
  const uint16_t exponent = uint16_t(Uniform(rng, 9, 20));
  return uint16_t(sign | (exponent << 10) | uint16_t(rng() & 0x3FF));
}

uint16_t AnyF16(CaseRng& rng) {
  switch (rng() % 8) {
    case 0:
      return Pick(rng, kInterestingF16);
    case 1:
      return uint16_t(rng());
    default:
      return OrdinaryF16(rng);
  }
}

uint8_t AdmittedScale(CaseRng& rng) { return uint8_t(Uniform(rng, 113, 128)); }

uint8_t AnyScale(CaseRng& rng) {
  switch (rng() % 6) {
    case 0:
      return Pick(rng, kInterestingScaleBytes);
    case 1:
      return uint8_t(rng());
    default:
      return AdmittedScale(rng);
  }
}

int EdgeInt(CaseRng& rng, int low, int high) {
  switch (rng() % 4) {
    case 0:
      return low;
    case 1:
      return high;
    default:
      return Uniform(rng, low, high);
  }
}

Tactic RandomTactic(CaseRng& rng) {
  static constexpr int kTiles[] = {1, 8, 16, 32, 64, 128, 256};
  Tactic tactic;
  tactic.cta_m = Pick(rng, kTiles);
  tactic.cta_n = Pick(rng, kTiles);
  tactic.cta_k = OneIn(rng, 4) ? 4 * Uniform(rng, 1, kMaxTileSize / 4) : Pick(rng, kInterestingCtaK);
  tactic.splits = OneIn(rng, 3) ? 1 : (OneIn(rng, 8) ? Uniform(rng, 1, kMaxSplits) : Uniform(rng, 1, 8));
  tactic.swizzle = Uniform(rng, 0, kMaxSwizzle);
  return tactic;
}

void RandomPayload(FuzzCase& c, CaseRng& rng) {
  for (uint16_t& a : c.activations) a = OneIn(rng, 16) ? AnyF16(rng) : OrdinaryF16(rng);
  for (uint8_t& byte : c.packed_codes) byte = uint8_t(rng());
  const bool admitted_layer = !OneIn(rng, 3);
  for (uint8_t& raw : c.scale_bytes) raw = admitted_layer ? AdmittedScale(rng) : AnyScale(rng);
}

void Reshape(FuzzCase& c, CaseRng& rng, int groups, int n, int k, std::vector<int> rows) {
  const size_t old_activations = c.activations.size(), old_codes = c.packed_codes.size(),
               old_scales = c.scale_bytes.size();
  ResizeCase(c, groups, n, k, rows);
  for (size_t i = old_activations; i < c.activations.size(); ++i) c.activations[i] = OrdinaryF16(rng);
  for (size_t i = old_codes; i < c.packed_codes.size(); ++i) c.packed_codes[i] = uint8_t(rng());
  for (size_t i = old_scales; i < c.scale_bytes.size(); ++i) c.scale_bytes[i] = AdmittedScale(rng);
}

std::vector<int> RowsPerGroup(const FuzzCase& c) {
  std::vector<int> rows(size_t(c.groups));
  for (int g = 0; g < c.groups; ++g) rows[g] = c.row_offsets[g + 1] - c.row_offsets[g];
  return rows;
}

void MutateShape(FuzzCase& c, CaseRng& rng, const MutationProfile& p) {
  int groups = c.groups, n = c.n, k = c.k;
  std::vector<int> rows = RowsPerGroup(c);
  switch (rng() % 4) {
    case 0:
      groups = EdgeInt(rng, 1, p.max_groups);
      rows.resize(size_t(groups), 1);
      break;
    case 1:
      rows[rng() % rows.size()] = EdgeInt(rng, 0, p.max_rows_per_group);
      break;
    case 2:
      n = OneIn(rng, 2) ? EdgeInt(rng, 1, p.max_n) : std::min(p.max_n, 8 * Uniform(rng, 1, 4));
      break;
    default:
      k = kBlockK * EdgeInt(rng, 1, p.max_k / kBlockK);
      break;
  }
  Reshape(c, rng, groups, n, k, rows);
}

void MutateTactic(FuzzCase& c, CaseRng& rng) {
  Tactic& t = c.tactic;
  switch (rng() % 5) {
    case 0:
      t.cta_k = Pick(rng, kInterestingCtaK);
      break;
    case 1: {
      // Splits at the clamp edges of the plan: one chunk per split, one more than the chunks.
      const int chunks = split_chunk_count(c.k, t.cta_k);
      const int choices[] = {1, 2, 3, chunks - 1, chunks, chunks + 1, kMaxSplits};
      t.splits = std::clamp(Pick(rng, choices), 1, kMaxSplits);
      break;
    }
    case 2:
      t = RandomTactic(rng);
      break;
    case 3:
      t.swizzle = Uniform(rng, 0, kMaxSwizzle);
      break;
    default:
      (OneIn(rng, 2) ? t.cta_m : t.cta_n) = EdgeInt(rng, 1, kMaxTileSize);
      break;
  }
}

void MutateRegistry(FuzzCase& c, CaseRng& rng) {
  auto& registry = c.registry;
  switch (rng() % 5) {
    case 0:
      registry.clear();
      registry.push_back({c.tactic, Transform::kOrdinary});
      if (OneIn(rng, 2)) registry.push_back({c.tactic, Transform::kFolded});
      break;
    case 1:
      if (!registry.empty()) registry.erase(registry.begin() + long(rng() % registry.size()));
      break;
    case 2:
      if (registry.size() < size_t(kMaxRegistryEntries)) {
        registry.push_back({OneIn(rng, 2) ? c.tactic : RandomTactic(rng),
                            OneIn(rng, 2) ? Transform::kOrdinary : Transform::kFolded});
      }
      break;
    case 3:
      // A folded instantiation of a tactic that differs from the ordinary one in one field:
      // a mirroring bug would pick it up.
      if (registry.size() < size_t(kMaxRegistryEntries)) {
        Tactic near = c.tactic;
        near.splits = near.splits == 1 ? 2 : near.splits - 1;
        registry.push_back({near, Transform::kFolded});
      }
      break;
    default:
      if (!registry.empty()) {
        RegistryEntry& entry = registry[rng() % registry.size()];
        entry.transform = entry.transform == Transform::kOrdinary ? Transform::kFolded : Transform::kOrdinary;
      }
      break;
  }
}

void MutateOnce(FuzzCase& c, CaseRng& rng, const MutationProfile& p) {
  switch (rng() % 12) {
    case 0:
    case 1:
      if (!c.scale_bytes.empty()) c.scale_bytes[rng() % c.scale_bytes.size()] = AnyScale(rng);
      break;
    case 2: {
      const uint8_t fill = Pick(rng, kInterestingScaleBytes);
      const bool uniform = OneIn(rng, 2);
      for (uint8_t& raw : c.scale_bytes) raw = uniform ? fill : AdmittedScale(rng);
      break;
    }
    case 3:
      if (!c.activations.empty()) c.activations[rng() % c.activations.size()] = Pick(rng, kInterestingF16);
      break;
    case 4:
      if (!c.activations.empty()) c.activations[rng() % c.activations.size()] = AnyF16(rng);
      break;
    case 5:
      if (!c.packed_codes.empty()) {
        uint8_t& byte = c.packed_codes[rng() % c.packed_codes.size()];
        const uint8_t code = uint8_t(rng() & 0xF);
        byte = OneIn(rng, 2) ? uint8_t((byte & 0xF0) | code) : uint8_t((byte & 0x0F) | (code << 4));
      }
      break;
    case 6:
      RandomPayload(c, rng);
      break;
    case 7:
      MutateShape(c, rng, p);
      break;
    case 8:
    case 9:
      MutateTactic(c, rng);
      break;
    case 10:
      switch (rng() % 3) {
        case 0:
          c.request = TransformRequest(rng() % 3);
          break;
        case 1:
          c.policy = FallbackPolicy(rng() % 2);
          break;
        default:
          c.model = StepModel(rng() % kStepModelCount);
          break;
      }
      break;
    default:
      MutateRegistry(c, rng);
      break;
  }
}

// Pulls an input decoded from the corpus (possibly larger than this target's profile) back
// inside the profile, keeping what fits.
void FitProfile(FuzzCase& c, CaseRng& rng, const MutationProfile& p) {
  std::vector<int> rows = RowsPerGroup(c);
  bool fits = c.groups <= p.max_groups && c.n <= p.max_n && c.k <= p.max_k;
  for (int r : rows) fits = fits && r <= p.max_rows_per_group;
  if (fits) return;
  const int groups = std::min(c.groups, p.max_groups);
  rows.resize(size_t(groups));
  for (int& r : rows) r = std::min(r, p.max_rows_per_group);
  Reshape(c, rng, groups, std::min(c.n, p.max_n), std::min(c.k, p.max_k), rows);
}

}  // namespace

FuzzCase RandomCase(CaseRng& rng, const MutationProfile& p) {
  FuzzCase c;
  const int groups = Uniform(rng, 1, p.max_groups);
  std::vector<int> rows(static_cast<size_t>(groups));
  for (int& r : rows) r = OneIn(rng, 6) ? 0 : Uniform(rng, 1, p.max_rows_per_group);
  const int n = Uniform(rng, 1, p.max_n);
  const int k = kBlockK * Uniform(rng, 1, p.max_k / kBlockK);
  ResizeCase(c, groups, n, k, rows);
  c.tactic = RandomTactic(rng);
  c.request = TransformRequest(rng() % 3);
  c.policy = FallbackPolicy(rng() % 2);
  c.model = OneIn(rng, 2) ? StepModel::kSm90Emulated : StepModel(rng() % kStepModelCount);
  if (!OneIn(rng, 8)) c.registry.push_back({c.tactic, Transform::kOrdinary});
  if (OneIn(rng, 2)) c.registry.push_back({c.tactic, Transform::kFolded});
  if (OneIn(rng, 4)) c.registry.push_back({RandomTactic(rng), Transform::kFolded});
  RandomPayload(c, rng);
  return c;
}

void MutateCase(FuzzCase& fuzz_case, CaseRng& rng, const MutationProfile& profile) {
  FitProfile(fuzz_case, rng, profile);
  const int count = Uniform(rng, 1, 3);
  for (int i = 0; i < count; ++i) MutateOnce(fuzz_case, rng, profile);
}

size_t MutateEncodedCase(uint8_t* data, size_t size, size_t max_size, unsigned seed,
                         const MutationProfile& profile, const ByteMutator& byte_mutator) {
  CaseRng rng(seed);
  static thread_local FuzzCase c;  // buffers reused across mutations
  if (DecodeCaseInto(std::span<const uint8_t>(data, size), c).ok()) {
    MutateCase(c, rng, profile);
  } else {
    c = RandomCase(rng, profile);
  }
  if (byte_mutator && !c.activations.empty() && OneIn(rng, 8)) {
    // Size-preserving byte mutation of the activation payload (libFuzzer's own operators
    // plus the dictionary), then back into the structure.
    static thread_local std::vector<uint8_t> raw;
    raw.resize(c.activations.size() * 2);
    std::memcpy(raw.data(), c.activations.data(), raw.size());
    const size_t mutated = byte_mutator(raw.data(), raw.size(), raw.size());
    std::memcpy(c.activations.data(), raw.data(), std::min(mutated, raw.size()));
  }
  for (int attempt = 0; EncodedSize(c) > max_size; ++attempt) {
    if (attempt == 8) return 0;
    std::vector<int> rows = RowsPerGroup(c);
    for (int& r : rows) r = r / 2;
    Reshape(c, rng, std::max(1, c.groups / 2), std::max(1, c.n / 2), kBlockK, rows);
  }
  static thread_local std::vector<uint8_t> encoded;
  if (!EncodeCaseInto(c, encoded).ok()) return 0;  // unreachable for a case built here; the test asserts it
  std::memcpy(data, encoded.data(), encoded.size());
  return encoded.size();
}

}  // namespace mxdiff::fuzz
