// Recycled sequence buffers (KV, draft KV, draft features, verify states). A new sequence's first touch of
// fresh memory is slow (page faults, ~3–25 ms per MB on a loaded VM), and a prefix-cache hit writes ~1 GB into
// a fresh 32K-token sequence; a buffer a finished sequence gave back is already mapped, so restoring into it is
// a plain copy. The pool never holds more than the most that live sequences held at once: when a new buffer
// must be made, idle ones are freed first until the total is back under that peak.
#pragma once

#include <cstddef>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace splash {

class StatePool {
 public:
  using AllocFn = std::function<void*(size_t bytes)>;
  using FreeFn = std::function<void(void*)>;
  StatePool() = default;
  StatePool(AllocFn alloc, FreeFn free) : alloc_(std::move(alloc)), free_(std::move(free)) {}
  StatePool(const StatePool&) = delete;
  StatePool& operator=(const StatePool&) = delete;
  ~StatePool() { clear(); }

  // A buffer of at least `need` bytes: the smallest idle one that is big enough, else a new one of `want`
  // (≥ need) bytes; nullptr when the allocation fails. Its usable size goes to *got when given.
  void* take(size_t need, size_t want, size_t* got = nullptr);
  void* take(size_t bytes, size_t* got = nullptr) { return take(bytes, bytes, got); }
  // Back to the pool (nullptr is ignored). The buffer must come from take().
  void give(void* p);
  // Frees every idle buffer.
  void clear();

  struct Stats {
    size_t live = 0, idle = 0, peak = 0, idle_buffers = 0;
  };
  Stats stats();

 private:
  struct Idle {
    void* p;
    size_t bytes;
  };
  AllocFn alloc_;
  FreeFn free_;
  std::mutex mu_;
  std::vector<Idle> idle_;
  std::unordered_map<void*, size_t> live_;
  size_t live_bytes_ = 0, idle_bytes_ = 0, peak_ = 0;
};

// Host memory for large state: 2 MiB aligned and marked for transparent huge pages (one fault per 2 MiB
// instead of 512), not zeroed. Freed with std::free.
void* host_state_alloc(size_t bytes);

}  // namespace splash
