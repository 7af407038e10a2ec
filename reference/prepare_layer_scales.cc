#include "reference/prepare_layer_scales.h"

#include <array>
#include <cstdlib>

#include "reference/bulk_loop.h"

namespace mxdiff {
namespace {

template <Transform kTransform>
const std::array<uint16_t, 256>& PreparedScaleTable() {
  static const std::array<uint16_t, 256> table = [] {
    std::array<uint16_t, 256> t{};
    for (int raw = 0; raw < 256; ++raw) t[size_t(raw)] = prepared_scale(kTransform, uint8_t(raw));
    return t;
  }();
  return table;
}

MXDIFF_BULK_LOOP void Lookup(const uint16_t* table, const uint8_t* scale_bytes, size_t count, uint16_t* prepared) {
  for (size_t i = 0; i < count; ++i) prepared[i] = table[scale_bytes[i]];
}

}  // namespace

void PrepareLayerScales(Transform transform, std::span<const uint8_t> scale_bytes, std::span<uint16_t> prepared) {
  if (prepared.size() < scale_bytes.size()) std::abort();  // a caller's bug: the loop below trusts the lengths
  const std::array<uint16_t, 256>& table = transform == Transform::kOrdinary
                                                ? PreparedScaleTable<Transform::kOrdinary>()
                                                : PreparedScaleTable<Transform::kFolded>();
  Lookup(table.data(), scale_bytes.data(), scale_bytes.size(), prepared.data());
}

}  // namespace mxdiff
