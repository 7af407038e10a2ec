#include "tests/kernels/random_layer.h"

#include <iterator>
#include <set>

#include "fmt/core.h"
#include "reference/fp16.h"
#include "reference/scale_class.h"

namespace mxdiff::testing {

GroupedProblem RandomLayer::problem() const {
  return GroupedProblem{.groups = groups,
                        .n = n,
                        .k = k,
                        .row_offsets = row_offsets,
                        .activations = activations,
                        .packed_codes = codes,
                        .scale_bytes = scales};
}

namespace {

uint16_t ModerateHalf(std::mt19937_64& rng) {
  const uint16_t sign = (rng() & 1) ? 0x8000 : 0;
  const uint16_t exponent = uint16_t(15 - 6 + rng() % 11);  // 2^-6 .. 2^4
  return uint16_t(sign | (exponent << 10) | (rng() & 0x3FF));
}

uint16_t SpecialHalf(std::mt19937_64& rng) {
  return kF16SpecialValues[rng() % std::size(kF16SpecialValues)];
}

}  // namespace

RandomLayer MakeRandomLayer(std::mt19937_64& rng, int n, int k, std::span<const int> rows_per_group,
                            ScaleBytes scale_bytes, double special_rate) {
  RandomLayer layer;
  layer.groups = int(rows_per_group.size());
  layer.n = n;
  layer.k = k;
  layer.row_offsets.push_back(0);
  for (int rows : rows_per_group) layer.row_offsets.push_back(layer.row_offsets.back() + rows);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  layer.activations.resize(size_t(layer.rows()) * k);
  for (uint16_t& value : layer.activations) value = unit(rng) < special_rate ? SpecialHalf(rng) : ModerateHalf(rng);
  layer.codes.resize(size_t(layer.groups) * n * k / 2);
  for (uint8_t& byte : layer.codes) byte = uint8_t(rng());
  layer.scales.resize(size_t(layer.groups) * n * k / kBlockK);
  const RawRange admitted = ScaleClassRange(ScaleClass::kAdmitted);
  const unsigned admitted_count = unsigned(admitted.last - admitted.first) + 1;
  for (uint8_t& raw : layer.scales) {
    if (scale_bytes == ScaleBytes::kAdmitted) {
      raw = uint8_t(admitted.first + rng() % admitted_count);
    } else {
      raw = rng() % 32 == 0 ? uint8_t(rng()) : uint8_t(100 + rng() % 41);
    }
  }
  return layer;
}

std::string DescribeMismatch(std::span<const uint16_t> expected, std::span<const uint16_t> got, int n) {
  if (expected.size() != got.size()) return fmt::format("sizes differ: {} vs {}", expected.size(), got.size());
  size_t count = 0;
  std::string text;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] == got[i]) continue;
    if (++count <= 5) {
      text += fmt::format(" [row {} col {}] expected {:04x} got {:04x};", i / n, i % n, expected[i], got[i]);
    }
  }
  return count == 0 ? "" : fmt::format("{} of {} elements differ:{}", count, expected.size(), text);
}

size_t DistinctValues(std::span<const uint16_t> bits) { return std::set<uint16_t>(bits.begin(), bits.end()).size(); }

}  // namespace mxdiff::testing
