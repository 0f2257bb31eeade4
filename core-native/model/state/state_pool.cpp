// Recycled sequence buffers: see state_pool.h.
#include "model/state/state_pool.h"

#include <algorithm>
#include <cstdlib>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace splash {

void* StatePool::take(size_t need, size_t want, size_t* got) {
  const size_t bytes = std::max(need, want);
  std::lock_guard<std::mutex> lock(mu_);
  size_t best = idle_.size();
  for (size_t i = 0; i < idle_.size(); ++i)
    if (idle_[i].bytes >= need && (best == idle_.size() || idle_[i].bytes < idle_[best].bytes)) best = i;
  void* p = nullptr;
  size_t size = bytes;
  if (best < idle_.size()) {
    p = idle_[best].p;
    size = idle_[best].bytes;
    idle_bytes_ -= size;
    idle_.erase(idle_.begin() + std::ptrdiff_t(best));
  } else {
    // keep live + idle + the new buffer within the peak of what live sequences held (or the new live total):
    // the largest idle buffers go first (none of them fits this request)
    const size_t limit = std::max(peak_, live_bytes_ + bytes);
    std::sort(idle_.begin(), idle_.end(), [](const Idle& a, const Idle& b) { return a.bytes < b.bytes; });
    while (!idle_.empty() && live_bytes_ + idle_bytes_ + bytes > limit) {
      free_(idle_.back().p);
      idle_bytes_ -= idle_.back().bytes;
      idle_.pop_back();
    }
    p = alloc_(bytes);
    if (!p) return nullptr;
  }
  live_.emplace(p, size);
  live_bytes_ += size;
  peak_ = std::max(peak_, live_bytes_);
  if (got) *got = size;
  return p;
}

void StatePool::give(void* p) {
  if (!p) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(p);
  if (it == live_.end()) return free_(p);  // not from this pool: free it as the allocator would
  idle_.push_back({p, it->second});
  idle_bytes_ += it->second;
  live_bytes_ -= it->second;
  live_.erase(it);
}

void StatePool::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Idle& b : idle_) free_(b.p);
  idle_.clear();
  idle_bytes_ = 0;
}

StatePool::Stats StatePool::stats() {
  std::lock_guard<std::mutex> lock(mu_);
  return {live_bytes_, idle_bytes_, peak_, idle_.size()};
}

void* host_state_alloc(size_t bytes) {
  constexpr size_t kHuge = size_t(2) << 20;
  if (bytes < kHuge) return std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  void* p = std::aligned_alloc(kHuge, (bytes + kHuge - 1) / kHuge * kHuge);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (p) madvise(p, (bytes + kHuge - 1) / kHuge * kHuge, MADV_HUGEPAGE);  // advice only: failure changes nothing
#endif
  return p;
}

}  // namespace splash
