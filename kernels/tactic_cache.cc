#include "kernels/tactic_cache.h"

namespace mxdiff {

std::optional<Tactic> TacticCache::Find(const std::string& device, const DispatchShape& shape) const {
  absl::MutexLock lock(&mutex_);
  for (const Entry& entry : entries_) {
    if (entry.device == device && entry.shape == shape) return entry.tactic;
  }
  return std::nullopt;
}

void TacticCache::Store(const std::string& device, const DispatchShape& shape, const Tactic& tactic) {
  absl::MutexLock lock(&mutex_);
  for (Entry& entry : entries_) {
    if (entry.device == device && entry.shape == shape) {
      entry.tactic = tactic;
      return;
    }
  }
  entries_.push_back({device, shape, tactic});
}

size_t TacticCache::size() const {
  absl::MutexLock lock(&mutex_);
  return entries_.size();
}

}  // namespace mxdiff
