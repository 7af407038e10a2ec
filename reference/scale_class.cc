#include "reference/scale_class.h"

#include "reference/admission.h"
#include "reference/transform.h"

namespace mxdiff {
namespace {

ScaleClass Derive(uint8_t raw) {
  if (FoldAdmitted(raw)) return ScaleClass::kAdmitted;
  const int a = adjusted_exponent(raw);
  if (a == 0) return ScaleClass::kFlushed;
  if (a == 30) return ScaleClass::kSaturated;
  if (a >= 18) return ScaleClass::kSignSpill;
  return ScaleClass::kFoldedInf;
}

struct Table {
  std::array<ScaleClass, 256> class_of{};
  std::array<RawRange, kScaleClassCount> range{};
};

const Table& ClassTable() {
  static const Table table = [] {
    Table t;
    std::array<bool, kScaleClassCount> seen{};
    for (int raw = 0; raw < 256; ++raw) {
      const ScaleClass c = Derive(uint8_t(raw));
      t.class_of[raw] = c;
      RawRange& range = t.range[int(c)];
      if (!seen[int(c)]) range.first = uint8_t(raw);
      range.last = uint8_t(raw);
      seen[int(c)] = true;
    }
    return t;
  }();
  return table;
}

}  // namespace

ScaleClass ClassifyScale(uint8_t raw) { return ClassTable().class_of[raw]; }

RawRange ScaleClassRange(ScaleClass scale_class) { return ClassTable().range[int(scale_class)]; }

std::string_view ScaleClassName(ScaleClass scale_class) {
  switch (scale_class) {
    case ScaleClass::kFlushed: return "a=0";
    case ScaleClass::kSaturated: return "a=30";
    case ScaleClass::kSignSpill: return "a=18..29";
    case ScaleClass::kFoldedInf: return "a=17";
    case ScaleClass::kAdmitted: return "admitted";
  }
  return "invalid";
}

}  // namespace mxdiff
