#include "runtime/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#define SPLASH_PAUSE() _mm_pause()
#else
#define SPLASH_PAUSE() std::this_thread::yield()
#endif

namespace splash {

ThreadPool::ThreadPool(int threads) {
  n_ = threads > 0 ? threads : int(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < n_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    generation_.fetch_add(1);
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  while (true) {
    // spin a little, then sleep
    int spins = 0;
    while (generation_.load(std::memory_order_acquire) == seen && spins < 20000) {
      SPLASH_PAUSE();
      ++spins;
    }
    if (generation_.load(std::memory_order_acquire) == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return generation_.load() != seen; });
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_) return;
    const std::function<void(int)>* job = job_;
    (*job)(index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::run(const std::function<void(int)>& job) {
  if (n_ == 1) {
    job(0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &job;
    pending_.store(n_ - 1, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  cv_.notify_all();
  job(0);
  while (pending_.load(std::memory_order_acquire) != 0) SPLASH_PAUSE();
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn, int64_t align) {
  if (n <= 0) return;
  const int64_t units = (n + align - 1) / align;
  const int parts = int(std::min<int64_t>(n_, units));
  if (parts <= 1) {
    fn(0, n, 0);
    return;
  }
  std::function<void(int)> job = [&](int i) {
    if (i >= parts) return;
    int64_t b = units * i / parts * align, e = std::min(n, units * (i + 1) / parts * align);
    if (b < e) fn(b, e, i);
  };
  run(job);
}

void ThreadPool::parallel_tasks(int64_t n, const std::function<void(int64_t)>& fn) {
  if (n <= 0) return;
  if (n == 1 || n_ == 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<int64_t> next{0};
  std::function<void(int)> job = [&](int) {
    for (int64_t i; (i = next.fetch_add(1)) < n;) fn(i);
  };
  run(job);
}

}  // namespace splash
