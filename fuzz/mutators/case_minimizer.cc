#include "fuzz/mutators/case_minimizer.h"

#include <algorithm>
#include <numeric>

namespace mxdiff::fuzz {
namespace {

struct Shape {
  std::vector<int> groups;  // kept groups of the current case, ascending
  std::vector<int> rows;    // rows kept per kept group (a prefix of its rows)
  int n = 0, k = 0;
};

Shape CurrentShape(const FuzzCase& c) {
  Shape s{std::vector<int>(size_t(c.groups)), {}, c.n, c.k};
  std::iota(s.groups.begin(), s.groups.end(), 0);
  for (int g = 0; g < c.groups; ++g) s.rows.push_back(c.group_rows(g));
  return s;
}

// The case cut to `s`: explicit tensors are sliced, recipes are kept (overrides beyond the new
// size dropped) and regenerated for the new shape.
FuzzCase Reshape(const FuzzCase& c, const Shape& s) {
  FuzzCase out = c;
  ResizeCase(out, int(s.groups.size()), s.n, s.k, s.rows);
  const size_t old_blocks = size_t(c.k) / kBlockK, new_blocks = size_t(s.k) / kBlockK;
  size_t row = 0;
  for (size_t i = 0; i < s.groups.size(); ++i) {
    const int g = s.groups[i];
    if (!c.recipe(TensorKind::kActivations)) {
      for (int r = 0; r < s.rows[i]; ++r, ++row) {
        const uint16_t* from = &c.activations[(size_t(c.row_offsets[g]) + size_t(r)) * size_t(c.k)];
        std::copy(from, from + s.k, &out.activations[row * size_t(s.k)]);
      }
    }
    for (int col = 0; col < s.n; ++col) {
      const size_t from_row = size_t(g) * size_t(c.n) + size_t(col), to_row = i * size_t(s.n) + size_t(col);
      if (!c.recipe(TensorKind::kCodes)) {
        std::copy_n(&c.packed_codes[from_row * size_t(c.k) / 2], s.k / 2, &out.packed_codes[to_row * size_t(s.k) / 2]);
      }
      if (!c.recipe(TensorKind::kScales)) {
        std::copy_n(&c.scale_bytes[from_row * old_blocks], new_blocks, &out.scale_bytes[to_row * new_blocks]);
      }
    }
  }
  for (int kind = 0; kind < kTensorKindCount; ++kind) {
    if (std::optional<TensorRecipe>& recipe = out.recipes[kind]) {
      const size_t count = out.element_count(TensorKind(kind));
      std::erase_if(recipe->overrides, [&](const TensorOverride& o) { return o.index >= count; });
    }
  }
  MaterializeCase(out);
  return out;
}

std::vector<Shape> ShapeEdits(const FuzzCase& c) {
  const Shape s = CurrentShape(c);
  std::vector<Shape> edits;
  auto without = [&](auto drop) {
    Shape e{{}, {}, s.n, s.k};
    for (size_t i = 0; i < s.groups.size(); ++i) {
      if (!drop(i)) e.groups.push_back(s.groups[i]), e.rows.push_back(s.rows[i]);
    }
    if (!e.groups.empty() && e.groups.size() < s.groups.size()) edits.push_back(e);
  };
  without([&](size_t i) { return s.rows[i] == 0; });                          // every empty expert
  without([&](size_t i) { return s.rows[i] == 0 && i >= s.groups.size() / 2; });  // the later half of them
  for (size_t i = s.groups.size(); i-- > 0;) {
    without([&](size_t j) { return j == i; });
  }
  for (size_t i = 0; i < s.groups.size(); ++i) {
    for (int rows : {s.rows[i] / 2, s.rows[i] - 1}) {
      if (rows < 0 || rows == s.rows[i]) continue;
      Shape e = s;
      e.rows[i] = rows;
      edits.push_back(e);
    }
  }
  for (int n : {s.n / 2, s.n - 1}) {
    if (n >= 1 && n < s.n) edits.push_back(Shape{s.groups, s.rows, n, s.k});
  }
  for (int k : {s.k / 2 / kBlockK * kBlockK, s.k - kBlockK}) {
    if (k >= kBlockK && k < s.k) edits.push_back(Shape{s.groups, s.rows, s.n, k});
  }
  return edits;
}

bool SmallEnoughToStore(const FuzzCase& c) {
  return c.activations.size() * 2 <= kMaxExplicitTensorBytes && c.packed_codes.size() <= kMaxExplicitTensorBytes &&
         c.scale_bytes.size() <= kMaxExplicitTensorBytes;
}

template <typename T>
std::vector<FuzzCase> ChunkEdits(const FuzzCase& c, std::vector<T> FuzzCase::*tensor, T simple) {
  std::vector<FuzzCase> edits;
  const std::vector<T>& values = c.*tensor;
  for (size_t chunks : {1, 2, 4, 8, 16}) {
    const size_t size = (values.size() + chunks - 1) / chunks;
    for (size_t begin = 0; size > 0 && begin < values.size(); begin += size) {
      const size_t end = std::min(values.size(), begin + size);
      if (std::all_of(values.begin() + long(begin), values.begin() + long(end), [&](T v) { return v == simple; })) {
        continue;
      }
      FuzzCase e = c;
      std::fill((e.*tensor).begin() + long(begin), (e.*tensor).begin() + long(end), simple);
      edits.push_back(std::move(e));
    }
  }
  return edits;
}

}  // namespace

MinimizeResult MinimizeCase(const FuzzCase& start, const std::function<bool(const FuzzCase&)>& keeps,
                            const MinimizeOptions& options) {
  MinimizeResult result{start};
  const auto deadline = std::chrono::steady_clock::now() + options.time_limit;
  auto budget_left = [&] {
    return result.evaluations < options.max_evaluations && std::chrono::steady_clock::now() < deadline;
  };
  auto try_edit = [&](const FuzzCase& candidate) {
    if (!budget_left() || !ValidateCase(candidate).ok()) return false;
    ++result.evaluations;
    if (!keeps(candidate)) return false;
    result.minimized = candidate;
    ++result.accepted;
    return true;
  };
  for (bool progress = true; progress && budget_left();) {  // the shape
    progress = false;
    for (const Shape& edit : ShapeEdits(result.minimized)) {
      if (try_edit(Reshape(result.minimized, edit))) {
        progress = true;
        break;
      }
    }
  }
  if (SmallEnoughToStore(result.minimized)) {  // the values, byte by byte
    FuzzCase stored = result.minimized;
    for (std::optional<TensorRecipe>& recipe : stored.recipes) recipe.reset();
    if (ValidateCase(stored).ok()) result.minimized = std::move(stored);  // the same bytes: no evaluation
    for (bool progress = true; progress && budget_left();) {
      progress = false;
      std::vector<FuzzCase> edits = ChunkEdits<uint16_t>(result.minimized, &FuzzCase::activations, 0x3C00);
      for (FuzzCase& e : ChunkEdits<uint8_t>(result.minimized, &FuzzCase::packed_codes, 0x22)) edits.push_back(e);
      for (FuzzCase& e : ChunkEdits<uint8_t>(result.minimized, &FuzzCase::scale_bytes, 127)) edits.push_back(e);
      if (result.minimized.tactic.swizzle != 0) {
        FuzzCase e = result.minimized;
        e.tactic.swizzle = 0;
        edits.push_back(e);
      }
      for (const FuzzCase& e : edits) {
        if (try_edit(e)) {
          progress = true;
          break;
        }
      }
    }
  }
  result.exhausted = !budget_left();
  return result;
}

}  // namespace mxdiff::fuzz
